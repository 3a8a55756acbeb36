// The gated MLP's activations in device code (see gated_act.h): one definition for every kernel
// that applies them, so fused and unfused paths compute the same function.
#pragma once

#include "cuda_common/gated_act.h"

namespace tunableop::cuda {

__device__ __forceinline__ float gated_act(GatedAct act, float g) {
  switch (act) {
    case GatedAct::kSilu: return g / (1.0f + __expf(-g));
    case GatedAct::kGeluTanh: return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
    case GatedAct::kGeluErf: return 0.5f * g * (1.0f + erff(g * 0.7071067811865476f));
  }
  return 0.f;
}

}  // namespace tunableop::cuda
