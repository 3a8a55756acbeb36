// Fused decode projection, normalised input, gated activation (gate_up): see fused_gemv_kernel.cuh.
#include "backends/cuda/fused_linear/fused_gemv_kernel.cuh"

namespace tunableop::cuda {

cudaError_t fused_gemv_gated(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  return fused::launch_elem<GemvIn::kNorm, GemvOut::kGated>(a, s, stream);
}

}  // namespace tunableop::cuda
