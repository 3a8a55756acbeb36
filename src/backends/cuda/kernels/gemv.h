// Our own skinny GEMM / GEMV kernels for few tokens (n <= 16), the decode-time LLM layout:
// TN, A = weight stored k x m column-major (each output row is one contiguous k-vector), B =
// activations stored k x n. See kernels/README.md for the contract.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cuda {

// One variant of the family.
struct GemvShape {
  int rows = 1;      // R: rows of C per warp group, sharing B loads (FMA kernel; 16 for mma)
  int k_split = 1;   // SK: warps splitting one row group's K range (reduced in shared memory)
  bool mma = false;  // tensor-core kernel (bf16/fp16): 16 rows x 8 columns per mma
  bool pdl = false;  // programmatic dependent launch (sm_90): launch overlaps the previous kernel
};

inline constexpr int64_t kGemvMaxN = 16;

// "Gemv_bf16_r4_sk1", "Gemv_bf16_mma_sk4", "Gemv_fp16_r2_sk2_pdl"
std::string gemv_name(DType dtype, const GemvShape& s);
// Unsupported unless TN, n <= 16, dtype fp32/bf16/fp16 (mma: bf16/fp16), lda, ldb (and batch
// strides of A and B) multiples of 16 bytes, and for pdl a device of compute capability >= 9.0;
// pointer alignment is checked at run time.
Status gemv_supports(const GemvShape& s, const GemmParams& p);
Status gemv_run(const GemvShape& s, const GemmParams& p, const GemmOperands& o);

// Every variant (all dtypes), Default-effort ones first.
std::vector<GemmCandidate> make_gemv_candidates();

}  // namespace tunableop::cuda
