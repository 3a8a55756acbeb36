// Merging two partial attentions of the same query rows (each over its own keys) from their
// log-sum-exps: out = (e^(lse_a - m) out_a + e^(lse_b - m) out_b) / (e^(lse_a - m) + e^(lse_b - m)),
// m = max(lse_a, lse_b). The C++17 boundary of attention_merge.cu (cudnn_sdpa_split.cc's last step).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

struct AttentionMergeArgs {
  bool bf16 = true;                           // else fp16
  int64_t rows = 0, heads = 0, head_dim = 0;  // head_dim a multiple of 8
  void* out = nullptr;                        // partial a in, the merged rows out: [rows][out_row_stride]
  int64_t out_row_stride = 0;                 // elements, a multiple of 8; out 16-byte aligned
  const void* part = nullptr;                 // partial b: [rows][part_row_stride], same alignment rules
  int64_t part_row_stride = 0;
  const float* lse_out = nullptr;   // [heads][rows], natural log
  const float* lse_part = nullptr;  // [heads][rows]
};

cudaError_t attention_merge(const AttentionMergeArgs& a, cudaStream_t stream);

}  // namespace tunableop::cuda
