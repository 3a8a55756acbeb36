// Element conversions for device code: every storage type (fp32, bf16, fp16) widens to fp32
// for math and narrows back with round-to-nearest-even. Shared by the CUDA backend's kernels
// and the LLM engine's; plain CUDA C++17, no library headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tunableop::cuda {

template <class T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half v) {
  return __half2float(v);
}

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

}  // namespace tunableop::cuda
