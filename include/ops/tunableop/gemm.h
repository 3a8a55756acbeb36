// GEMM: C = alpha * op(A) * op(B) + beta * C, column-major (BLAS convention), optionally
// strided-batched. beta == 0 never reads C (it may hold NaN).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tunableop/op.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

class Context;  // tunableop/context.h
struct GemmOp;

struct GemmParams {
  using Op = GemmOp;          // ctx.plan(p) makes a Plan<GemmOp>
  DType dtype = DType::kF32;  // of A and B, and of C unless out_dtype says otherwise; accumulation
                              // is fp32 (fp64 for kF64)
  // C's dtype when it is not `dtype`: kF32 for bf16 or fp16 inputs (bf16 x bf16 -> fp32: the
  // accumulation written out, never rounded to the inputs' type). Unset: C is `dtype`.
  std::optional<DType> out_dtype;
  char transa = 'N', transb = 'N';  // 'N' or 'T'
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 -> dense (rows of the stored matrix)
  double alpha = 1.0, beta = 0.0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements; 0 -> dense (ld * cols)
  bool allow_tf32 = false;                           // CUDA fp32 only: permission to use tf32 tensor cores

  // Rows/cols of A and B as stored (before op()).
  int64_t a_rows() const { return transa == 'N' ? m : k; }
  int64_t a_cols() const { return transa == 'N' ? k : m; }
  int64_t b_rows() const { return transb == 'N' ? k : n; }
  int64_t b_cols() const { return transb == 'N' ? n : k; }
  DType c_dtype() const { return out_dtype.value_or(dtype); }
  bool widens() const { return c_dtype() != dtype; }  // C wider than A and B (out_dtype set)
  // Fills lda/ldb/ldc/strides left at 0 with dense values (and drops an out_dtype equal to dtype).
  GemmParams with_defaults() const;
  // Checks trans letters, sizes >= 0, ld >= rows, strides large enough, batch >= 1.
  Status validate() const;
  // Elements spanned by each operand over the whole batch (what a buffer must hold).
  int64_t a_span() const;
  int64_t b_span() const;
  int64_t c_span() const;
  double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
};

// PyTorch TunableOp layout: "GemmTunableOp_float_TN" (or "GemmStridedBatchedTunableOp_..."),
// "tn_1024_512_2048", plus "_ld_LDA_LDB_LDC" when any ld is not dense and "_B_BATCH" (and
// "_S_SA_SB_SC" for non-dense strides) for batches; tf32 adds "_tf32" to the op name's dtype,
// and a wider C its dtype after A and B's ("GemmTunableOp_BFloat16_float_TN").
std::string gemm_op_signature(const GemmParams& p);
std::string gemm_params_signature(const GemmParams& p);
// The inverse (for offline tuning): rebuilds params from the two strings.
StatusOr<GemmParams> parse_gemm_signature(const std::string& op, const std::string& params);

struct GemmOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  void* stream = nullptr;  // cudaStream_t on CUDA; unused on CPU
  // While tuning, the op allocates workspace_bytes(p) and passes it here; in ordinary dispatch
  // it is null and a candidate that needs workspace uses its own (as cuBLAS does per handle).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The GEMM op: its types, for Candidate<GemmOp>, CandidateFamily<GemmOp> and Plan<GemmOp>.
struct GemmOp {
  using Params = GemmParams;
  using Operands = GemmOperands;
};
// One way to compute a GEMM. Backends register these into Registry::list<GemmCandidate>().
using GemmCandidate = Candidate<GemmOp>;
// A candidate whose name expands at run time into several (e.g. one per cuBLASLt algorithm).
using GemmCandidateFamily = CandidateFamily<GemmOp>;
using GemmPlan = Plan<GemmOp>;
extern template class Plan<GemmOp>;  // instantiated in the library (src/ops/gemm/dispatch.cc)

// Runs the GEMM through the context: tuned solution, tuning on a miss, or Default.
// The plain call: one lookup by the hashed problem (no strings, no locks on a hit).
Status gemm(Context& ctx, const GemmParams& p, const GemmOperands& ops);
// A plan for p (what ctx.plan(p) returns): validate once, run many times. Fails when p is
// invalid; an empty problem (m or n 0) gives a plan whose runs do nothing.
StatusOr<GemmPlan> make_plan(Context& ctx, const GemmParams& p);

// Row-major y[tokens, out] = x[tokens, in] * W[out, in]^T (PyTorch nn.Linear without bias),
// mapped to the column-major "tn_<out>_<tokens>_<in>" problem.
Status linear(Context& ctx, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
              void* stream = nullptr);
GemmParams linear_params(DType dtype, int64_t tokens, int64_t in, int64_t out);

}  // namespace tunableop
