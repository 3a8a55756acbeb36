#include "llm/attention_gemms.h"

#include <cmath>

namespace tunableop::llm {

namespace {
// A column-major strided-batched GEMM, B never transposed.
struct Batched {
  char transa;
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
};
GemmParams batched(DType dtype, int64_t batch, const Batched& b) {
  GemmParams p;
  p.dtype = dtype;
  p.transa = b.transa;
  p.transb = 'N';
  p.m = b.m, p.n = b.n, p.k = b.k;
  p.lda = b.lda, p.ldb = b.ldb, p.ldc = b.ldc;
  p.batch = batch;
  p.stride_a = b.stride_a, p.stride_b = b.stride_b, p.stride_c = b.stride_c;
  return p;
}
}  // namespace

AttentionGemms prefill_attention_gemms(const ModelConfig& c, DType dtype, int64_t seqs, int64_t tokens,
                                       int64_t max_seq) {
  const int64_t hd = c.head_dim, T = tokens, M = tokens * (c.num_heads / c.num_kv_heads);
  const int64_t mats = seqs * c.num_kv_heads, cache = max_seq * hd;
  AttentionGemms g;
  // S^T [T x M] = K^T' (the cache's [T x hd] rows, read transposed) x q_perm^T [hd x M], scaled.
  g.scores = batched(dtype, mats, {'T', T, M, hd, hd, hd, T, cache, M * hd, M * T});
  g.scores.alpha = c.attention_scale() > 0 ? c.attention_scale() : 1.0 / std::sqrt(double(hd));
  // O^T [hd x M] = V^T [hd x T] x P^T [T x M].
  g.output = batched(dtype, mats, {'N', hd, M, T, hd, T, hd, cache, M * T, M * hd});
  return g;
}

}  // namespace tunableop::llm
