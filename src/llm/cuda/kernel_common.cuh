// Device-code helpers shared by the engine's kernel files (kernels.cu, family_kernels.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_common/pdl.cuh"
#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

// Every kernel of a decode step starts like this: wait for the previous kernel of the stream
// (a no-op unless launched with PDL), then let the next one launch (it waits for us in turn).
__device__ __forceinline__ void pdl_enter() {
  ::tunableop::cuda::pdl_wait();
  ::tunableop::cuda::pdl_launch_dependents();
}

// Calls f.template operator()<E>() with E the element type for `e`.
template <class F>
cudaError_t dispatch(Elem e, F&& f) {
  if (e == Elem::kF32) return f(float{});
  return f(__nv_bfloat16{});
}

}  // namespace tunableop::llm::cuda
