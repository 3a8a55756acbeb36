// The C++17 boundary of the streaming decode attention kernels (decode_stream_kernel.cuh):
// FlashArgs in (flash_launch.h; `splits`: clusters per (sequence, kv head), `workspace`: their
// partials when splits > 1), a cudaError_t out (cudaErrorInvalidValue: no kernel for these arguments;
// cudaErrorNotSupported: not an sm_90 device).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda {

// Query rows per kv head (q_len * heads / kv_heads) times head dim the kernels take: the rows and
// their accumulators live in registers.
constexpr int kDecodeStreamMaxRowDims = 512;

// One launch shape: `cluster` blocks per kv head (2-8, a power of two), each a ring of `stages`
// chunks of `keys` keys (2-16 stages; keys a multiple of 16), chunk i worked on by consumer warp
// i % `warps` (1-8), one producer warp beside them. `stages` a multiple of `warps`: each slot of
// the ring is always the same warp's, so a warp waiting for a slot's next phase has seen the one
// before it complete (an mbarrier parity wait cannot tell phase k from phase k - 2).
struct DecodeStreamConfig {
  int cluster = 8, keys = 32, stages = 4, warps = 4;
  int splits = 1;  // clusters per (sequence, kv head), 1-256 (args.splits at launch)
};

// Shared memory one block of `config` takes (fails the launch above 227 KB).
size_t decode_stream_smem_bytes(const DecodeStreamConfig& config, int head_dim, int rows, int elem_bytes);

// Rows the instance for `rows` query rows per kv head holds (1, 2 or 4; 0: too many).
int decode_stream_rows(int rows);

// Bytes of workspace a launch with args.splits > 1 needs (0 for one split).
size_t decode_stream_workspace_bytes(const FlashArgs& args, int head_dim, int cluster);

// args.splits > 1: args.workspace holds decode_stream_workspace_bytes and `tickets` batch *
// kv_heads * cluster zeroed counters, which the kernel leaves zeroed (decode_tickets, workspace.h).
cudaError_t decode_stream_bf16(const FlashArgs& args, int head_dim, const DecodeStreamConfig& config, unsigned* tickets,
                               cudaStream_t stream);
cudaError_t decode_stream_f16(const FlashArgs& args, int head_dim, const DecodeStreamConfig& config, unsigned* tickets,
                              cudaStream_t stream);

}  // namespace tunableop::cuda
