// Device-code helpers shared by the engine's kernel files (kernels.cu, family_kernels.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>

#include "cuda_common/pdl.cuh"
#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

// Every kernel of a decode step starts like this: wait for the previous kernel of the stream
// (a no-op unless launched with PDL), then let the next one launch (it waits for us in turn).
__device__ __forceinline__ void pdl_enter() {
  ::tunableop::cuda::pdl_wait();
  ::tunableop::cuda::pdl_launch_dependents();
}

// Warp- and block-wide sums and maxima (fp32). block_reduce: through shared memory (`scratch`,
// one float per warp); every thread gets the result.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = kMax ? -FLT_MAX : 0.f;
  for (int w = 0; w < warps; ++w) r = kMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

// Calls f.template operator()<E>() with E the element type for `e`.
template <class F>
cudaError_t dispatch(Elem e, F&& f) {
  if (e == Elem::kF32) return f(float{});
  return f(__nv_bfloat16{});
}

}  // namespace tunableop::llm::cuda
