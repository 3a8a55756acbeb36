// The C++17 boundary between the flash-attention kernels (nvcc) and their candidates (host
// C++20): plain data in, a cudaError_t out (cudaErrorInvalidValue: no kernel for these
// arguments). Layouts are AttentionParams' (src/ops/attention/params.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

// One compiled tile configuration. rows = query rows per block (GQA packs the group's heads
// into rows: row r of kv head g is query r / group of head g * group + r % group), keys = keys
// per K/V tile, warps = warps along the rows (each owns rows / warps consecutive rows),
// stages = K/V tiles in the cp.async ring.
struct FlashConfig {
  int head_dim = 128;
  int rows = 128;
  int keys = 64;
  int warps = 8;
  int stages = 2;
};

struct FlashArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const int32_t* block_table = nullptr;  // paged: [batch][pages_per_seq]
  const int32_t* kv_lens = nullptr;      // optional: [batch]
  const int32_t* q_lens = nullptr;       // optional: [batch] real queries; rows past them are zeros
  int64_t q_row_stride = 0, o_row_stride = 0;
  int64_t max_seq = 0;  // contiguous cache
  int batch = 1, q_len = 1, kv_len = 1, heads = 1, kv_heads = 1;
  int page_size = 0, pages_per_seq = 0;  // page_size 0: contiguous
  int causal = 1;
  float scale = 1.f;  // softmax scale (the kernels work in log2 units)
  // Sliding window (0: none): the query at key position i sees keys i - window < j <= i only;
  // kernels that take it never read the keys before a block's first window. Logit softcapping
  // (0: none): scores s * scale become softcap * tanh(s * scale / softcap). Candidates whose
  // kernels do not implement them refuse such problems.
  int window = 0;
  float softcap = 0.f;
  // splits > 1: each block takes 1/splits of its key tiles and writes fp32 partial outputs and
  // log-sum-exps into the workspace; flash_combine then merges them into out.
  int splits = 1;
  void* workspace = nullptr;
};

// The configurations compiled for head_dim (an array of `count`).
const FlashConfig* flash_configs(int head_dim, int* count);

// Bytes of workspace a split launch needs (0 for splits == 1).
size_t flash_workspace_bytes(const FlashArgs& args, int head_dim);

// Queues the kernel (and the combine when splits > 1). Pointers and row strides must be
// 16-byte aligned; batch * kv_heads <= 65535, splits <= 256 (the caller checks).
cudaError_t flash_attention_bf16(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream);
cudaError_t flash_attention_f16(const FlashArgs& args, const FlashConfig& cfg, cudaStream_t stream);

}  // namespace tunableop::cuda
