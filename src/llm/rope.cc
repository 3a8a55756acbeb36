#include "llm/rope.h"

#include <cmath>

namespace tunableop::llm {

RopeTable make_rope_table(int64_t head_dim, double theta, int64_t max_pos) {
  RopeTable t;
  t.half = head_dim / 2;
  t.cos.resize(size_t(max_pos * t.half));
  t.sin.resize(size_t(max_pos * t.half));
  std::vector<float> inv_freq(size_t(t.half));
  // transformers: 1 / base ** (arange(0, d, 2).float() / d), all in fp32; the angle pos * f is
  // also an fp32 product. Following it keeps our angles bit-close to the reference's.
  for (int64_t i = 0; i < t.half; ++i) {
    inv_freq[size_t(i)] = 1.0f / std::pow(float(theta), float(2 * i) / float(head_dim));
  }
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < t.half; ++i) {
      float angle = float(p) * inv_freq[size_t(i)];
      t.cos[size_t(p * t.half + i)] = std::cos(angle);
      t.sin[size_t(p * t.half + i)] = std::sin(angle);
    }
  }
  return t;
}

}  // namespace tunableop::llm
