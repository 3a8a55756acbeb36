// Fused decode projection, residual add (o, down): see fused_gemv_kernel.cuh.
#include "backends/cuda/fused_linear/fused_gemv_kernel.cuh"

namespace tunableop::cuda {

cudaError_t fused_gemv_residual(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  return fused::launch_elem<GemvIn::kInput, GemvOut::kAddResidual>(a, s, stream);
}

}  // namespace tunableop::cuda
