// Flash-attention kernels for __nv_bfloat16, head_dim 256: every configuration of
// TUNABLEOP_FLASH_CONFIGS_D256 (one translation unit per dtype and head dim keeps builds parallel).
#include "backends/cuda/attention/flash_launch_impl.cuh"

namespace tunableop::cuda {

cudaError_t flash_launch_bf16_d256(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream) {
#define X(D_, BM, BN, W, S) TUNABLEOP_FLASH_CASE(__nv_bfloat16, D_, BM, BN, W, S)
  TUNABLEOP_FLASH_CONFIGS_D256(X)
#undef X
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
