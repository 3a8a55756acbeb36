#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "ops/gemm/operand_span.h"
#include "tunableop/checked_size.h"
#include "tunableop/gemm.h"

namespace tunableop {

using ops::check_operand_size;
using ops::operand_span;

GemmParams GemmParams::with_defaults() const {
  GemmParams p = *this;
  p.transa = char(std::toupper(static_cast<unsigned char>(p.transa)));
  p.transb = char(std::toupper(static_cast<unsigned char>(p.transb)));
  if (p.transa == 'C') p.transa = 'T';  // real types: conjugate transpose is transpose
  if (p.transb == 'C') p.transb = 'T';
  if (p.out_dtype == p.dtype) p.out_dtype.reset();  // one spelling per problem
  if (p.lda == 0) p.lda = std::max<int64_t>(1, p.a_rows());
  if (p.ldb == 0) p.ldb = std::max<int64_t>(1, p.b_rows());
  if (p.ldc == 0) p.ldc = std::max<int64_t>(1, p.m);
  // Saturated on overflow (CheckedInt::value): validate() then reports the operand as too large.
  if (p.stride_a == 0) p.stride_a = (CheckedInt(p.lda) * p.a_cols()).value();
  if (p.stride_b == 0) p.stride_b = (CheckedInt(p.ldb) * p.b_cols()).value();
  if (p.stride_c == 0) p.stride_c = (CheckedInt(p.ldc) * p.n).value();
  // An operand without elements (A and B when k == 0, C when m or n is 0) is never read or
  // written, so its stride means nothing, and validate() cannot bound it; but every kernel
  // computes batch * stride for each operand's pointer. 0 keeps those offsets 0 (a fuzz finding:
  // k = 0 with stride_b 2^63 - 1 overflowed them).
  if (p.a_rows() == 0 || p.a_cols() == 0) p.stride_a = 0;
  if (p.b_rows() == 0 || p.b_cols() == 0) p.stride_b = 0;
  if (p.m == 0 || p.n == 0) p.stride_c = 0;
  return p;
}

Status GemmParams::validate() const {
  if (transa != 'N' && transa != 'T')
    return Status::invalid_argument(fmt::format("transa must be 'N' or 'T', got '{}'", transa));
  if (transb != 'N' && transb != 'T')
    return Status::invalid_argument(fmt::format("transb must be 'N' or 'T', got '{}'", transb));
  if (m < 0 || n < 0 || k < 0)
    return Status::invalid_argument(fmt::format("m, n, k must be >= 0, got {}, {}, {}", m, n, k));
  if (batch < 1) return Status::invalid_argument(fmt::format("batch must be >= 1, got {}", batch));
  if (is_fp8(dtype) || is_fp8(c_dtype()))
    return Status::invalid_argument(
        "GEMM computes in fp32, fp64, bf16 or fp16; fp8 inputs are ScaledGemm's (tunableop/scaled_gemm.h)");
  if (lda < std::max<int64_t>(1, a_rows()))
    return Status::invalid_argument(fmt::format("lda ({}) must be >= the rows of A as stored ({})", lda, a_rows()));
  if (ldb < std::max<int64_t>(1, b_rows()))
    return Status::invalid_argument(fmt::format("ldb ({}) must be >= the rows of B as stored ({})", ldb, b_rows()));
  if (ldc < std::max<int64_t>(1, m)) return Status::invalid_argument(fmt::format("ldc ({}) must be >= m ({})", ldc, m));
  if (batch > 1) {
    if (CheckedInt c_matrix = CheckedInt(ldc) * n; m > 0 && n > 0 && (!c_matrix.ok() || stride_c < c_matrix.value()))
      return Status::invalid_argument(
          fmt::format("stride_c ({}) must be >= ldc * n ({} * {}): batches of C would overlap", stride_c, ldc, n));
    if (stride_a < 0 || stride_b < 0) return Status::invalid_argument("strides must be >= 0");
  }
  TUNABLEOP_RETURN_IF_ERROR(check_operand_size("A", dtype, batch, stride_a, lda, a_rows(), a_cols()));
  TUNABLEOP_RETURN_IF_ERROR(check_operand_size("B", dtype, batch, stride_b, ldb, b_rows(), b_cols()));
  TUNABLEOP_RETURN_IF_ERROR(check_operand_size("C", c_dtype(), batch, stride_c, ldc, m, n));
  if (dtype != DType::kF32 && allow_tf32) return Status::invalid_argument("allow_tf32 applies to fp32 GEMMs only");
  if (widens() && !(c_dtype() == DType::kF32 && (dtype == DType::kBF16 || dtype == DType::kF16)))
    return Status::invalid_argument(
        fmt::format("out_dtype {} with {} inputs: a wider C is fp32 for bf16 or fp16 inputs", dtype_name(c_dtype()),
                    dtype_name(dtype)));
  return Status::ok();
}

int64_t GemmParams::a_span() const { return operand_span(batch, stride_a, lda, a_rows(), a_cols()); }
int64_t GemmParams::b_span() const { return operand_span(batch, stride_b, ldb, b_rows(), b_cols()); }
int64_t GemmParams::c_span() const { return operand_span(batch, stride_c, ldc, m, n); }

GemmParams linear_params(DType dtype, int64_t tokens, int64_t in, int64_t out) {
  // Row-major y[t, o] = sum_i x[t, i] W[o, i]. Column-major, y is (out x tokens) = W' x' where
  // W (row-major out x in) is a column-major (in x out) matrix used transposed, and x
  // (row-major tokens x in) is a column-major (in x tokens) matrix used as is: "tn".
  GemmParams p;
  p.dtype = dtype;
  p.transa = 'T';
  p.transb = 'N';
  p.m = out;
  p.n = tokens;
  p.k = in;
  return p.with_defaults();
}

}  // namespace tunableop
