// `Default` on CUDA: attention as its definition, the numerics reference of the GPU candidates.
// Q, K and V are gathered into dense per-(sequence, kv head) matrices (any cache layout, any
// lengths), then per slab S = scale Q K^T with cuBLAS (bf16/fp16/fp32 in, fp32 scores), a
// masked row softmax into P (rounded to the storage type, as the fused kernels round their
// probabilities), and O = P V with cuBLAS (fp32 out), scattered back into the output rows.
// The score matrices of many slabs at once would not fit for long prompts, and the dense keys and
// values of every slab not for large batches (256 sequences of 2048 positions of Llama-2-7B: 8 GiB,
// which kept its decode-attention problem from being tuned; issue 33), so slabs go in chunks
// whose scores stay under one budget and whose gathered keys and values under another
// (MathBudgets: 512 MiB each).
#include "backends/cuda/attention/math_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "backends/cuda/attention/math_kernels.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

struct Layout {
  int64_t slabs = 0, rows = 0;     // batch * kv_heads; query rows per slab
  int64_t chunk = 0;               // slabs per GEMM pair
  size_t qg = 0, kg = 0, og = 0;   // byte offsets in the workspace
  size_t s = 0, p = 0, total = 0;  //
};

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

Layout layout(const AttentionParams& p, const MathBudgets& budget) {
  Layout l;
  const size_t es = dtype_size(p.dtype), d = size_t(p.head_dim), L = size_t(p.kv_len);
  l.slabs = p.batch * p.kv_heads;
  l.rows = p.q_len * p.group();
  const size_t per_slab_scores = size_t(l.rows) * L * (4 + es), per_slab_kv = 2 * L * d * es;
  l.chunk = std::clamp<int64_t>(int64_t(std::min(budget.scores / std::max<size_t>(per_slab_scores, 1),
                                                 budget.kv / std::max<size_t>(per_slab_kv, 1))),
                                1, l.slabs);
  const size_t q_bytes = size_t(l.slabs * l.rows) * d;
  l.qg = 0;
  l.kg = align256(q_bytes * es);
  const size_t kv_bytes = align256(size_t(l.chunk) * L * d * es);  // one chunk's K (then its V)
  l.og = l.kg + 2 * kv_bytes;
  l.s = l.og + align256(q_bytes * 4);
  l.p = l.s + align256(size_t(l.chunk * l.rows) * L * 4);
  l.total = l.p + align256(size_t(l.chunk * l.rows) * L * es);
  return l;
}

Status supports(const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  if (p.kv_len > INT_MAX || p.q_len * p.group() > INT_MAX || p.head_dim > INT_MAX)
    return Status::unsupported("dimensions beyond the 32-bit cuBLAS API");
  if (p.batch * p.kv_heads * p.q_len * p.group() > INT_MAX || p.batch * p.kv_heads * p.kv_len > INT_MAX)
    return Status::unsupported("more than 2^31 rows (grid x)");
  return Status::ok();
}

cudaDataType_t data_type(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

Status run(const AttentionParams& p, const AttentionOperands& o, const MathBudgets& budget) {
  TUNABLEOP_RETURN_IF_ERROR(supports(p));
  const Layout l = layout(p, budget);
  auto ws = operand_workspace(o, l.total);
  if (!ws.is_ok()) return ws.status();
  char* base = static_cast<char*>(*ws);
  auto stream = static_cast<cudaStream_t>(o.stream);
  MathArgs a;
  a.elem = p.dtype == DType::kBF16 ? MathElem::kBF16 : p.dtype == DType::kF16 ? MathElem::kF16 : MathElem::kF32;
  a.q = o.q, a.k = o.k, a.v = o.v, a.out = o.out;
  a.block_table = p.paged() ? o.block_table : nullptr;
  a.kv_lens = p.var_kv_len ? o.kv_lens : nullptr;
  a.q_lens = p.var_q_len ? o.q_lens : nullptr;
  a.q_row_stride = p.q_row_stride, a.o_row_stride = p.o_row_stride, a.max_seq = p.max_seq;
  a.batch = p.batch, a.q_len = p.q_len, a.kv_len = p.kv_len, a.heads = p.heads, a.kv_heads = p.kv_heads;
  a.head_dim = p.head_dim, a.page_size = p.page_size, a.pages_per_seq = p.pages_per_seq, a.causal = p.causal;
  a.window = p.window, a.softcap = float(p.softcap);

  const size_t es = dtype_size(p.dtype);
  const int64_t d = p.head_dim, L = p.kv_len, M = l.rows;
  void* qg = base + l.qg;
  void* kg = base + l.kg;
  void* vg = base + l.kg + (l.og - l.kg) / 2;
  float* og = reinterpret_cast<float*>(base + l.og);
  float* s = reinterpret_cast<float*>(base + l.s);
  void* pr = base + l.p;
  TUNABLEOP_CUDA_TRY(math_gather_q(a, qg, stream));

  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  TUNABLEOP_CUBLAS_TRY(cublasSetStream(h->blas, stream));
  const cudaDataType_t t = data_type(p.dtype);
  const float scale = float(p.softmax_scale()), one = 1.f, zero = 0.f;
  for (int64_t bg0 = 0; bg0 < l.slabs; bg0 += l.chunk) {
    const int64_t n = std::min(l.chunk, l.slabs - bg0);
    const char* q0 = static_cast<const char*>(qg) + size_t(bg0 * M * d) * es;
    // This chunk's keys and values, gathered into the chunk-sized buffers (the GEMMs of the chunk
    // before, queued earlier on the stream, are done with them by then).
    TUNABLEOP_CUDA_TRY(math_gather_kv(a, bg0, n, kg, vg, stream));
    const void* k0 = kg;
    const void* v0 = vg;
    // Row-major S [M][L] is column-major S^T [L x M] = K^T' (K rows read transposed) x Q^T.
    TUNABLEOP_CUBLAS_TRY(cublasGemmStridedBatchedEx(h->blas, CUBLAS_OP_T, CUBLAS_OP_N, int(L), int(M), int(d), &scale,
                                                    k0, t, int(d), L * d, q0, t, int(d), M * d, &zero, s, CUDA_R_32F,
                                                    int(L), M * L, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    TUNABLEOP_CUDA_TRY(math_softmax(a, bg0, n, s, pr, stream));
    // Row-major O [M][d] is column-major O^T [d x M] = V^T [d x L] x P^T [L x M].
    TUNABLEOP_CUBLAS_TRY(cublasGemmStridedBatchedEx(
        h->blas, CUBLAS_OP_N, CUBLAS_OP_N, int(d), int(M), int(L), &one, v0, t, int(d), L * d, pr, t, int(L), M * L,
        &zero, og + bg0 * M * d, CUDA_R_32F, int(d), M * d, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  TUNABLEOP_CUDA_TRY(math_scatter(a, og, stream));
  return Status::ok();
}

}  // namespace

AttentionCandidate make_math_attention(MathBudgets budgets) {
  AttentionCandidate c;
  c.name = "Default";
  c.device = DeviceKind::kCuda;
  c.info = CandidateInfo{"cuBLAS", "math", {}};
  c.supports = [](const AttentionParams& p) { return supports(p); };
  c.run = [budgets](const AttentionParams& p, const AttentionOperands& o) { return run(p, o, budgets); };
  c.workspace_bytes = [budgets](const AttentionParams& p) { return layout(p, budgets).total; };
  return c;
}

}  // namespace tunableop::cuda
