// Fused decode projection, fp32 store (tensor parallelism's row-parallel partial sums): see
// fused_gemv_kernel.cuh.
#include "backends/cuda/fused_linear/fused_gemv_kernel.cuh"

namespace tunableop::cuda {

cudaError_t fused_gemv_store_f32(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  return fused::launch_elem<GemvIn::kInput, GemvOut::kStoreF32>(a, s, stream);
}

}  // namespace tunableop::cuda
