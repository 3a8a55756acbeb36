// "Default": cuBLAS's own choice (cublasGemmEx / cublasGemmStridedBatchedEx with
// CUBLAS_GEMM_DEFAULT). It is the fallback and the numerics reference on the GPU.
#pragma once

#include "tunableop/gemm.h"

namespace tunableop::cuda {

GemmCandidate make_default_gemm();

// The plain cuBLAS call, also used by the padded-ld candidate on its aligned copies.
Status cublas_gemm(const GemmParams& p, const void* a, const void* b, void* c, void* stream);

// Shared shape checks for the cuBLAS and cuBLASLt candidates: trans letters, and sizes that
// fit the 32-bit (classic) API.
Status check_blas_shape(const GemmParams& p);

}  // namespace tunableop::cuda
