#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/gemm_and_bias/bias_act.h"

namespace tunableop::cuda {

namespace {

__device__ inline float load(float x) { return x; }
__device__ inline double load(double x) { return x; }
__device__ inline float load(__half x) { return __half2float(x); }
__device__ inline float load(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(double* p, double v) { *p = v; }
__device__ inline void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ inline float tanh_of(float x) { return tanhf(x); }
__device__ inline double tanh_of(double x) { return ::tanh(x); }

template <int Act, class A>
__device__ inline A activate(A x) {
  if constexpr (Act == 1) {
    return x > A(0) ? x : A(0);
  } else if constexpr (Act == 2) {
    const A k = A(0.79788456080286535588);  // sqrt(2 / pi)
    return A(0.5) * x * (A(1) + tanh_of(k * (x + A(0.044715) * x * x * x)));
  } else {
    return x;
  }
}

// One thread per row i (coalesced along the column), grid.y strides over the columns.
template <class T, int Act>
__global__ void bias_act_kernel(T* c, const T* bias, int64_t m, int64_t n, int64_t ldc) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m) return;
  const auto b = load(bias[i]);
  for (int64_t j = blockIdx.y; j < n; j += gridDim.y) {
    T* p = c + i + j * ldc;
    store(p, activate<Act>(load(*p) + b));
  }
}

template <class T>
cudaError_t launch(int act, void* c, const void* bias, int64_t m, int64_t n, int64_t ldc, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(unsigned((m + kThreads - 1) / kThreads), unsigned(n < 65535 ? n : 65535));
  T* cp = static_cast<T*>(c);
  const T* bp = static_cast<const T*>(bias);
  switch (act) {
    case 0: bias_act_kernel<T, 0><<<grid, kThreads, 0, stream>>>(cp, bp, m, n, ldc); break;
    case 1: bias_act_kernel<T, 1><<<grid, kThreads, 0, stream>>>(cp, bp, m, n, ldc); break;
    case 2: bias_act_kernel<T, 2><<<grid, kThreads, 0, stream>>>(cp, bp, m, n, ldc); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t bias_act_launch(int dtype, int act, void* c, const void* bias, int64_t m, int64_t n, int64_t ldc,
                            cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  switch (dtype) {
    case 0: return launch<float>(act, c, bias, m, n, ldc, stream);
    case 1: return launch<double>(act, c, bias, m, n, ldc, stream);
    case 2: return launch<__nv_bfloat16>(act, c, bias, m, n, ldc, stream);
    case 3: return launch<__half>(act, c, bias, m, n, ldc, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace tunableop::cuda
