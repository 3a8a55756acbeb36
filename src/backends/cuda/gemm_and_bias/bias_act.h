// The boundary between our bias + activation kernel (nvcc) and the candidates (host C++20):
// plain data in, a cudaError_t out.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

// C[i + j * ldc] = act(C[i + j * ldc] + bias[i]) over the m x n matrix, in fp32 (fp64 for
// fp64), rounded once to the storage type. dtype: tunableop::DType's value (0 fp32, 1 fp64,
// 2 bf16, 3 fp16); act: tunableop::Activation's (0 none, 1 relu, 2 gelu, tanh approximation).
// Queued on `stream`; cudaErrorInvalidValue for an unknown dtype/act.
cudaError_t bias_act_launch(int dtype, int act, void* c, const void* bias, int64_t m, int64_t n, int64_t ldc,
                            cudaStream_t stream);

}  // namespace tunableop::cuda
