// Fused decode projection, normalised input, qkv rows with RoPE and the KV-cache write (decode
// qkv): see fused_gemv_kernel.cuh.
#include "backends/cuda/fused_linear/fused_gemv_kernel.cuh"

namespace tunableop::cuda {

cudaError_t fused_gemv_rope(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  return fused::launch_elem<GemvIn::kNorm, GemvOut::kRope>(a, s, stream);
}

}  // namespace tunableop::cuda
