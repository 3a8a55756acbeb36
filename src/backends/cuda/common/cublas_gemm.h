// The plain cuBLAS GEMM (cublasGemmEx / cublasGemmStridedBatchedEx, CUBLAS_GEMM_DEFAULT): what
// Default runs, and what the padded-ld and split-m candidates run on their copies.
#pragma once

#include "tunableop/gemm.h"

namespace tunableop::cuda {

Status cublas_gemm(const GemmParams& p, const void* a, const void* b, void* c, void* stream);

// Shared shape checks for the cuBLAS and cuBLASLt candidates: trans letters, and sizes that
// fit the 32-bit (classic) API.
Status check_blas_shape(const GemmParams& p);

}  // namespace tunableop::cuda
