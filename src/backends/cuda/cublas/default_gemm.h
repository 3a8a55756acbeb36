// "Default": cuBLAS's own choice (cublasGemmEx / cublasGemmStridedBatchedEx with
// CUBLAS_GEMM_DEFAULT). It is the fallback and the numerics reference on the GPU.
#pragma once

#include "tunableop/gemm.h"

namespace tunableop::cuda {

GemmCandidate make_default_gemm();

}  // namespace tunableop::cuda
