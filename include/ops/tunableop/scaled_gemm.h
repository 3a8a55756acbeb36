// ScaledGemm: the FP8 GEMM behind torch._scaled_mm (PyTorch TunableOp's ScaledGemmTunableOp).
// Column-major, BLAS convention, C never read (beta 0; it may hold NaN):
//   C[i,j] = scale_a(i) * scale_b(j) * sum_l op(A)[i,l] op(B)[l,j]  (+ bias[i])
// A and B hold fp8 values (e4m3 or e5m2); the scales are fp32 in device memory:
//   tensorwise: one scale each, scale_a(i) = scale_a[0], scale_b(j) = scale_b[0];
//   rowwise:    scale_a has m elements (one per row of C, i.e. per row of op(A)) and scale_b n
//               (one per column of C, i.e. per column of op(B)): cuBLASLt's outer-vector mode.
// C is bf16, fp16 or fp32; the optional bias has m elements (one per row of C, broadcast over
// the n columns), bf16, fp16 or fp32.
// A row-major y[tokens, out] = x[tokens, in] W[out, in]^T (nn.Linear) is the "tn" problem with
// m = out, n = tokens, k = in: A = W (rowwise: one scale per output channel), B = x (one scale
// per token).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tunableop/op.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

class Context;
struct ScaledGemmOp;

// PyTorch's "rw_<0|1>" (use_rowwise).
enum class ScaleMode { kTensorwise = 0, kRowwise = 1 };
const char* scale_mode_name(ScaleMode s);  // "tensorwise", "rowwise"

struct ScaledGemmParams {
  using Op = ScaledGemmOp;
  DType a_dtype = DType::kF8E4M3;  // fp8 e4m3 or e5m2
  DType b_dtype = DType::kF8E4M3;
  DType out_dtype = DType::kBF16;   // C: bf16, fp16 or fp32
  std::optional<DType> bias_dtype;  // unset: no bias; else bf16, fp16 or fp32
  ScaleMode scale_mode = ScaleMode::kTensorwise;
  char transa = 'T', transb = 'N';  // 'N' or 'T'
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 -> dense

  int64_t a_rows() const { return transa == 'N' ? m : k; }
  int64_t a_cols() const { return transa == 'N' ? k : m; }
  int64_t b_rows() const { return transb == 'N' ? k : n; }
  int64_t b_cols() const { return transb == 'N' ? n : k; }
  bool has_bias() const { return bias_dtype.has_value(); }
  int64_t scale_a_count() const { return scale_mode == ScaleMode::kRowwise ? m : 1; }
  int64_t scale_b_count() const { return scale_mode == ScaleMode::kRowwise ? n : 1; }
  // Elements spanned by each operand (ld gaps included).
  int64_t a_span() const;
  int64_t b_span() const;
  int64_t c_span() const;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }

  // Upper-cases the transposes and fills lda/ldb/ldc left at 0 with dense values.
  ScaledGemmParams with_defaults() const;
  // fp8 A and B, a bf16/fp16/fp32 C and bias, 'N'/'T', m, n >= 0, k >= 1 (with nothing to sum
  // there is nothing to scale: cuBLASLt refuses k == 0 too), ld >= rows, sizes that fit.
  Status validate() const;
};

// PyTorch's layout, byte for byte:
//   op:     "ScaledGemmTunableOp_<A>_<B>_<C>_<TT>", e.g.
//           "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN" (C "float" for fp32)
//   params: "<tt>_<m>_<n>_<k>_ld_<lda>_<ldb>_<ldc>_rw_<0|1>_bias_<None|BFloat16|Half|Float>"
//           (the leading dimensions always; the bias by c10's ScalarType name).
// PyTorch keeps use_fast_accum out of the key; so do we (fast accumulation is a candidate
// property here, and the numerics check decides whether it is accurate enough).
std::string scaled_gemm_op_signature(const ScaledGemmParams& p);
std::string scaled_gemm_params_signature(const ScaledGemmParams& p);
// The inverse (offline tuning): fails naming what is wrong, e.g. ROCm's fnuz types.
StatusOr<ScaledGemmParams> parse_scaled_gemm_signature(const std::string& op, const std::string& params);
inline constexpr const char* kScaledGemmOpPrefix = "ScaledGemmTunableOp_";

struct ScaledGemmOperands {
  const void* a = nullptr;         // fp8, a_span() elements
  const void* b = nullptr;         // fp8, b_span() elements
  const float* scale_a = nullptr;  // scale_a_count() fp32 values, device memory
  const float* scale_b = nullptr;  // scale_b_count()
  const void* bias = nullptr;      // m elements of bias_dtype, when the params have a bias
  void* c = nullptr;
  void* stream = nullptr;  // cudaStream_t on CUDA; unused on CPU
  // As GemmOperands: given while tuning, null in ordinary dispatch.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

struct ScaledGemmOp {
  using Params = ScaledGemmParams;
  using Operands = ScaledGemmOperands;
};
using ScaledGemmCandidate = Candidate<ScaledGemmOp>;
using ScaledGemmCandidateFamily = CandidateFamily<ScaledGemmOp>;
using ScaledGemmPlan = Plan<ScaledGemmOp>;
extern template class Plan<ScaledGemmOp>;

// Runs it through the context: tuned solution, tuning on a miss, or Default.
Status scaled_gemm(Context& ctx, const ScaledGemmParams& p, const ScaledGemmOperands& ops);
StatusOr<ScaledGemmPlan> make_plan(Context& ctx, const ScaledGemmParams& p);

// Row-major y[tokens, out] = (x[tokens, in] W[out, in]^T) scaled, as the "tn" problem.
ScaledGemmParams scaled_linear_params(DType fp8, DType out_dtype, ScaleMode mode, int64_t tokens, int64_t in,
                                      int64_t out);

// Host quantization to fp8, for a row-major rows x cols fp32 matrix x (row stride ldx): the
// scale maps the largest magnitude onto the fp8 type's largest value, x ~= q * scale, q rounded
// to nearest (saturating). Tensorwise: one scale for the matrix; rowwise: one per row. In the
// "tn" layout (nn.Linear) the weight [out, in] and the activations [tokens, in] are such
// matrices, and rowwise scales are exactly ScaledGemm's scale_a and scale_b. An all-zero row
// (or matrix) gets scale 1, a tiny one at least the smallest normal float. q: rows x cols fp8
// values, row stride ldq; scales: 1 or rows values. Fails, naming the element, on NaN or inf (no
// scale represents them), and on bad sizes.
Status quantize_fp8(DType fp8, ScaleMode mode, int64_t rows, int64_t cols, const float* x, int64_t ldx, void* q,
                    int64_t ldq, float* scales);
// The inverse: x = q * scale in fp32 (one rounding of the product).
Status dequantize_fp8(DType fp8, ScaleMode mode, int64_t rows, int64_t cols, const void* q, int64_t ldq,
                      const float* scales, float* x, int64_t ldx);
// The largest finite value of an fp8 type (448 for e4m3, 57344 for e5m2), and its unit
// roundoff (2^-4, 2^-3): the relative error of one rounding is at most that.
double fp8_max(DType fp8);
double fp8_unit_roundoff(DType fp8);

}  // namespace tunableop
