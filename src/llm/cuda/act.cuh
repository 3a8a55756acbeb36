// The gated MLP's activations in device code, shared by the element-wise kernel (kernels.cu) and
// the fused gate_up projection (fused_gemv_kernel.cuh), so both compute the same function.
#pragma once

#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

__device__ __forceinline__ float act_fn(Act act, float g) {
  switch (act) {
    case Act::kSilu: return g / (1.0f + __expf(-g));
    case Act::kGeluTanh: return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
    case Act::kGeluErf: return 0.5f * g * (1.0f + erff(g * 0.7071067811865476f));
  }
  return 0.f;
}

}  // namespace tunableop::llm::cuda
