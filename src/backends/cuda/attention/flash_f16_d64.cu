// Flash-attention kernels for __half, head_dim 64: every configuration of
// TUNABLEOP_FLASH_CONFIGS_D64 (one translation unit per dtype and head dim keeps builds parallel).
#include "backends/cuda/attention/flash_launch_impl.cuh"

namespace tunableop::cuda {

cudaError_t flash_launch_f16_d64(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream) {
#define X(D_, BM, BN, W, S) TUNABLEOP_FLASH_CASE(__half, D_, BM, BN, W, S)
  TUNABLEOP_FLASH_CONFIGS_D64(X)
#undef X
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
