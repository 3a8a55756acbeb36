#include "llm/cpu/family_kernels.h"

#include <cmath>

#include "llm/cpu/kernels.h"

namespace tunableop::llm::cpu {

void add_bias(float* y, const float* bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * width;
    for (int64_t i = 0; i < width; ++i) yr[i] += bias[i];
  }
}

void head_rmsnorm(float* x, int64_t rows, int64_t row_stride, int64_t first_head, int64_t heads, int64_t head_dim,
                  const float* w, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    // Each head is a row of rmsnorm's (in place is fine: it reads a row before writing it).
    float* head0 = x + r * row_stride + first_head * head_dim;
    rmsnorm(head0, w, heads, head_dim, eps, /*add_one=*/false, head0);
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace tunableop::llm::cpu
