// The C++17 boundary of the cluster decode attention kernels (decode_cluster_kernel.cuh): FlashArgs
// in (flash_launch.h; `splits` = clusters per (sequence, kv head), `workspace` = their partials
// when splits > 1), a cudaError_t out (cudaErrorInvalidValue: no kernel for these arguments;
// cudaErrorNotSupported: not an sm_90 device).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda {

// Query rows per kv head (q_len * heads / kv_heads) the kernels take.
constexpr int kDecodeClusterMaxRows = 8;

// Whether the current device runs thread-block clusters (sm_90 and later); asked once per device.
bool decode_cluster_available();

// Clusters per (sequence, kv head) at most (args.splits).
constexpr int kDecodeClusterMaxSplits = 256;

// `cluster` blocks per cluster: 1, 2, 4, 8 or 16; `warps` per block: 1-8 (1-4 with two stages);
// `stages` 1 (a warp's next tile is loaded after its current one) or 2 (while); args.splits clusters per
// (sequence, kv head), 1-256. splits > 1: args.workspace holds decode_cluster_workspace_bytes and
// `tickets` batch * kv_heads * cluster zeroed counters, which the kernel leaves zeroed
// (decode_tickets, workspace.h).
cudaError_t decode_cluster_bf16(const FlashArgs& args, int head_dim, int cluster, int warps, int stages,
                                unsigned* tickets, cudaStream_t stream);
cudaError_t decode_cluster_f16(const FlashArgs& args, int head_dim, int cluster, int warps, int stages,
                               unsigned* tickets, cudaStream_t stream);

// Bytes of workspace a launch with args.splits > 1 needs (0 for one split).
size_t decode_cluster_workspace_bytes(const FlashArgs& args, int head_dim, int cluster);

}  // namespace tunableop::cuda
