// The C++17 boundary between the gemv kernels (compiled by nvcc) and the candidates (host C++20):
// plain data in, a cudaError_t out (cudaErrorInvalidValue: no kernel for these arguments).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

struct GemvLaunch {
  int rows = 1;     // rows per warp group: 1, 2, 4
  int k_split = 1;  // warps splitting K: 1, 2, 4, 8 (mma also 16)
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int m = 0, n = 0;  // n in 1..16
  int64_t k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;  // <= 65535 (grid.y)
  float alpha = 1.f, beta = 0.f;
  int mma = 0;  // 1: tensor-core kernel (bf16/fp16; `rows` unused, 16 rows per block)
  int pdl = 0;  // 1: programmatic dependent launch (sm_90; see pdl_wait in gemv_kernel.cuh)
};

// Queue the TN kernel on `stream` (one translation unit per dtype); A, B and lda/ldb (and batch
// strides) must be 16-byte aligned, 1 <= n <= 16, batch <= 65535 (the caller checks).
cudaError_t gemv_launch_f32(const GemvLaunch& args, cudaStream_t stream);
cudaError_t gemv_launch_bf16(const GemvLaunch& args, cudaStream_t stream);
cudaError_t gemv_launch_f16(const GemvLaunch& args, cudaStream_t stream);

}  // namespace tunableop::cuda
