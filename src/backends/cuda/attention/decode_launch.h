// The C++17 boundary of the one-launch decode attention kernels (decode_kernel.cuh): FlashArgs
// in (flash_launch.h; `splits` = blocks per kv head, `workspace` = the split partials in
// flash_workspace_bytes' layout), a cudaError_t out (cudaErrorInvalidValue: no kernel for
// these arguments).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda {

// Query rows per kv head (q_len * heads / kv_heads) a kernel exists for at this head dim
// (64: 32, 128: 16, 256: 8).
int decode_attention_max_rows(int head_dim);

// `warps` per block (1-8), args.splits 1-32; tickets: batch * kv_heads zeroed counters that the
// kernel leaves zeroed (decode_tickets, workspace.h), needed when splits > 1.
cudaError_t decode_attention_bf16(const FlashArgs& args, int head_dim, int warps, unsigned* tickets,
                                  cudaStream_t stream);
cudaError_t decode_attention_f16(const FlashArgs& args, int head_dim, int warps, unsigned* tickets,
                                 cudaStream_t stream);

}  // namespace tunableop::cuda
