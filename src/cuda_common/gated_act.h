// The gated MLP's activations, named for host code (plain C++17): the LLM engine's element-wise
// kernel and the CUDA backend's fused projections compute them with gated_act() (gated_act.cuh).
#pragma once

namespace tunableop::cuda {

enum class GatedAct : int { kSilu = 0, kGeluTanh = 1, kGeluErf = 2 };

}  // namespace tunableop::cuda
