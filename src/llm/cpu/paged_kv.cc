#include "llm/cpu/paged_kv.h"

#include <cstring>

namespace tunableop::llm::cpu {

void store_kv_paged(const float* qkv, int64_t rows, int64_t row_stride, int64_t q_dim, const int32_t* seqs,
                    const int32_t* positions, const int32_t* seq_lens, const PagedKvCache& cache, int64_t layer,
                    const int32_t* table) {
  const PagedKvCache::Geometry& g = cache.geometry();
  const int64_t kv_dim = g.n_kv_heads * g.head_dim, pps = g.pages_per_seq();
  const size_t bytes = size_t(g.head_dim) * sizeof(float);
  float* kp = static_cast<float*>(cache.k(layer));
  float* vp = static_cast<float*>(cache.v(layer));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seq = seqs[r], pos = positions[r];
    if (pos >= seq_lens[seq]) continue;
    const int64_t page = table[seq * pps + pos / g.page_size];
    const float* k = qkv + r * row_stride + q_dim;
    const float* v = k + kv_dim;
    for (int64_t h = 0; h < g.n_kv_heads; ++h) {
      const int64_t off = ((page * g.n_kv_heads + h) * g.page_size + pos % g.page_size) * g.head_dim;
      std::memcpy(kp + off, k + h * g.head_dim, bytes);
      std::memcpy(vp + off, v + h * g.head_dim, bytes);
    }
  }
}

}  // namespace tunableop::llm::cpu
