// Configuration table, workspace size and the per-dtype entry points (switch on head dim).
#include "backends/cuda/attention/flash_configs.h"
#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda {

cudaError_t flash_launch_bf16_d64(const FlashArgs&, const FlashConfig&, cudaStream_t);
cudaError_t flash_launch_bf16_d128(const FlashArgs&, const FlashConfig&, cudaStream_t);
cudaError_t flash_launch_bf16_d256(const FlashArgs&, const FlashConfig&, cudaStream_t);
cudaError_t flash_launch_f16_d64(const FlashArgs&, const FlashConfig&, cudaStream_t);
cudaError_t flash_launch_f16_d128(const FlashArgs&, const FlashConfig&, cudaStream_t);
cudaError_t flash_launch_f16_d256(const FlashArgs&, const FlashConfig&, cudaStream_t);

namespace {
#define X(D_, BM, BN, W, S) FlashConfig{D_, BM, BN, W, S},
constexpr FlashConfig kD64[] = {TUNABLEOP_FLASH_CONFIGS_D64(X)};
constexpr FlashConfig kD128[] = {TUNABLEOP_FLASH_CONFIGS_D128(X)};
constexpr FlashConfig kD256[] = {TUNABLEOP_FLASH_CONFIGS_D256(X)};
#undef X
}  // namespace

const FlashConfig* flash_configs(int head_dim, int* count) {
  switch (head_dim) {
    case 64: *count = int(sizeof(kD64) / sizeof(kD64[0])); return kD64;
    case 128: *count = int(sizeof(kD128) / sizeof(kD128[0])); return kD128;
    case 256: *count = int(sizeof(kD256) / sizeof(kD256[0])); return kD256;
  }
  *count = 0;
  return nullptr;
}

size_t flash_workspace_bytes(const FlashArgs& a, int head_dim) {
  if (a.splits <= 1) return 0;
  const size_t rows = size_t(a.q_len) * size_t(a.heads / a.kv_heads);
  return size_t(a.splits) * size_t(a.batch) * size_t(a.kv_heads) * rows * size_t(head_dim + 1) * sizeof(float);
}

cudaError_t flash_attention_bf16(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream) {
  switch (cfg.head_dim) {
    case 64: return flash_launch_bf16_d64(args, cfg, stream);
    case 128: return flash_launch_bf16_d128(args, cfg, stream);
    case 256: return flash_launch_bf16_d256(args, cfg, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t flash_attention_f16(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream) {
  switch (cfg.head_dim) {
    case 64: return flash_launch_f16_d64(args, cfg, stream);
    case 128: return flash_launch_f16_d128(args, cfg, stream);
    case 256: return flash_launch_f16_d256(args, cfg, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
