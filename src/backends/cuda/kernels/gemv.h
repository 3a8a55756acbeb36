// Our own skinny GEMM / GEMV kernels for few tokens (n <= 16), the decode-time LLM layout:
// TN, A = weight stored k x m column-major (each output row is one contiguous k-vector), B =
// activations stored k x n. See kernels/README.md for the contract.
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cuda {

// One variant of the family: R output rows per warp group, SK warps splitting K inside a block.
struct GemvShape {
  int rows = 1;     // R: rows of C each warp group computes (several rows per warp share B loads)
  int k_split = 1;  // SK: warps that split one row group's K range (reduced in shared memory)
};

inline constexpr int64_t kGemvMaxN = 16;

// "Gemv_bf16_r4_sk1"
std::string gemv_name(DType dtype, GemvShape s);
// Unsupported unless TN, n <= 16, dtype fp32/bf16/fp16, and lda, ldb (and batch strides of A
// and B) multiples of 16 bytes; pointer alignment is checked at run time.
Status gemv_supports(const GemvShape& s, const GemmParams& p);
Status gemv_run(const GemvShape& s, const GemmParams& p, const GemmOperands& o);

// Every variant (all dtypes), Default-effort ones first.
std::vector<GemmCandidate> make_gemv_candidates();

}  // namespace tunableop::cuda
