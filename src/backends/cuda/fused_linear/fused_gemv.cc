// The fused decode projections' front: shapes, support rules and the dispatch to the per-epilogue
// translation units (fused_gemv_<epilogue>.cu).
#include "backends/cuda/fused_linear/fused_gemv.h"

#include <cstdint>

namespace tunableop::cuda {

cudaError_t fused_gemv_store(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);
cudaError_t fused_gemv_residual(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);
cudaError_t fused_gemv_gated(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);
cudaError_t fused_gemv_argmax(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);
cudaError_t fused_gemv_store_f32(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);
cudaError_t fused_gemv_rope(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);

namespace {

// Many rows and short k: several rows per warp share each input vector; few rows or long k:
// warps split k so that enough loads are in flight.
constexpr FusedGemvShape kShapes[] = {{2, 1}, {1, 1}, {4, 1}, {1, 2}, {2, 2}, {1, 4}, {1, 8}};
constexpr FusedGemvShape kGatedShapes[] = {{2, 1}, {4, 1}, {2, 2}, {4, 2}, {2, 4}, {2, 8}};

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool fused_gemv_offered(GemvOut out, const FusedGemvShape& s) {
  const FusedGemvShape* shapes = nullptr;
  const int count = fused_gemv_shapes(out, &shapes);
  for (int i = 0; i < count; ++i) {
    if (shapes[i].rows == s.rows && shapes[i].k_split == s.k_split) return true;
  }
  return false;
}

int fused_gemv_shapes(GemvOut out, const FusedGemvShape** shapes) {
  if (out == GemvOut::kGated || out == GemvOut::kRope) {  // pairs of rows
    *shapes = kGatedShapes;
    return int(sizeof(kGatedShapes) / sizeof(kGatedShapes[0]));
  }
  *shapes = kShapes;
  return int(sizeof(kShapes) / sizeof(kShapes[0]));
}

const char* fused_gemv_unsupported(const FusedGemvArgs& a, const FusedGemvShape& s) {
  const bool norm = a.in_kind == GemvIn::kNorm;
  switch (a.out_kind) {
    case GemvOut::kStore:
    case GemvOut::kGated:
    case GemvOut::kArgmax:
    case GemvOut::kRope:
      if (!norm) return "this output takes a normalised input (rmsnorm prologue)";
      break;
    case GemvOut::kAddResidual:
    case GemvOut::kStoreF32:
      if (norm) return "the residual and fp32 outputs take a plain input";
      break;
  }
  if (!fused_gemv_offered(a.out_kind, s)) return "shape not offered";
  if (a.n < 1 || a.n > kFusedGemvMaxN) return "n (tokens) must be 1..8";
  const int64_t elem = a.e == Elem::kF32 ? 4 : 2;
  if (a.k < 1 || (a.k * elem) % 16 != 0) return "k must be a positive multiple of 16 bytes";
  if (a.m < 1 || (a.out_kind == GemvOut::kGated && a.m % 2 != 0)) return "m must be positive (gated: even)";
  if (a.m > (int64_t(1) << 31) - 1) return "m must fit an int32 index";
  if (!a.w || !aligned16(a.w)) return "W must be 16-byte aligned";
  if (norm) {
    if (!a.x || !a.norm_w || !aligned16(a.x) || !aligned16(a.norm_w)) return "x and norm_w must be 16-byte aligned";
    // The normalised input lives in shared memory: n x k elements per block.
    if (size_t(a.n) * size_t(a.k) * size_t(elem) > 160 * 1024) return "n x k too large for shared memory";
  } else if (!a.input || !aligned16(a.input)) {
    return "input must be 16-byte aligned";
  }
  switch (a.out_kind) {
    case GemvOut::kStore:
    case GemvOut::kStoreF32:
      if (!a.y) return "no output";
      break;
    case GemvOut::kAddResidual:
      if (!a.residual) return "no residual";
      break;
    case GemvOut::kGated:
      if (!a.gated) return "no gated output";
      break;
    case GemvOut::kArgmax:
      if (!a.y || !a.ids || !a.keys || !a.counter) return "argmax needs logits, ids, keys and counter";
      break;
    case GemvOut::kRope: {
      const GemvRope& r = a.rope;
      if (!a.y) return "no output";
      if (r.n_heads < 1 || r.n_kv_heads < 1 || r.head_dim < 2 || r.head_dim % 2 != 0)
        return "rope: heads must be positive and head_dim even";
      if ((r.n_heads + 2 * r.n_kv_heads) * r.head_dim != a.m)
        return "rope: m must be (n_heads + 2 n_kv_heads) x head_dim";
      if (!r.seqs || !r.positions || !r.cos || !r.sin || !r.k_cache || !r.v_cache)
        return "rope: seqs, positions, cos, sin and the caches must be set";
      if (r.block_table ? (!r.seq_lens || r.page_size < 1 || r.pages_per_seq < 1) : r.max_seq < 1)
        return "rope: a static cache needs max_seq, a paged one seq_lens, page_size and pages_per_seq";
      break;
    }
  }
  return nullptr;
}

cudaError_t fused_gemv(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  if (fused_gemv_unsupported(a, s)) return cudaErrorInvalidValue;
  switch (a.out_kind) {
    case GemvOut::kStore: return fused_gemv_store(a, s, stream);
    case GemvOut::kAddResidual: return fused_gemv_residual(a, s, stream);
    case GemvOut::kGated: return fused_gemv_gated(a, s, stream);
    case GemvOut::kArgmax: return fused_gemv_argmax(a, s, stream);
    case GemvOut::kStoreF32: return fused_gemv_store_f32(a, s, stream);
    case GemvOut::kRope: return fused_gemv_rope(a, s, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
