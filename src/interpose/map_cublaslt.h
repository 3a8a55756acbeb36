// cublasLtMatmul calls -> our GEMM, GemmAndBias or (FP8 A and B with scale pointers) ScaledGemm
// problem, exactly, or the reason why not.
//
// The matmul descriptor and the four layouts are read through the program's own cuBLASLt (the
// library that made them). Reading ~50 attributes costs ~0.7 us, so what the descriptors say is
// cached by their raw bytes: cuBLASLt's descriptors are plain values of documented size
// (cublasLtMatmulDescOpaque_t, cublasLtMatrixLayoutOpaque_t), identical settings give identical
// bytes, and the pointers they may hold that we accept (the bias; an FP8 call's scales) are part
// of the key. A repeated call then costs one hash of 512 bytes.
#pragma once

#include <cublasLt.h>

#include "interpose/abi.h"
#include "tunableop/gemm.h"
#include "tunableop/gemm_and_bias.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::interpose {

// The program's cuBLASLt functions the mapping needs.
struct LtFunctions {
  cublasStatus_t (*desc_get)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void*, size_t, size_t*) = nullptr;
  cublasStatus_t (*layout_get)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, void*, size_t,
                               size_t*) = nullptr;
  // To learn the default value of attributes we require to be unset.
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t) = nullptr;
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t, int64_t) = nullptr;
};

struct LtMapped {
  bool has_bias = false;
  GemmParams gemm;  // the problem (also bias.gemm when has_bias)
  GemmAndBiasParams bias;
  GemmOperands ops;      // a, b, c (= D), stream
  bool swap_ab = false;  // row-major D: ops.a is the call's B and ops.b its A
  const void* bias_ptr = nullptr;
  // An FP8 call (A and B fp8, tensorwise or outer-vector scales, alpha 1, beta 0, column-major):
  // the problem is `scaled`, its operands `scaled_ops`; the fields above are unset.
  bool fp8 = false;
  ScaledGemmParams scaled;
  ScaledGemmOperands scaled_ops;
};

// Reason::kServed means "mapped". `allow_tf32` is TUNABLEOP_ALLOW_TF32 (cuBLASLt has no math
// mode: COMPUTE_32F_FAST_TF32 or the setting allow tf32).
Reason map_lt_call(const LtCall& call, const LtFunctions& fns, bool allow_tf32, LtMapped* out);

// Drops the descriptor cache (tests).
void clear_lt_cache();

}  // namespace tunableop::interpose
