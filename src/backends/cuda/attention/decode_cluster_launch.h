// The C++17 boundary of the cluster decode attention kernels (decode_cluster_kernel.cuh): FlashArgs
// in (flash_launch.h; `splits` and `workspace` unused), a cudaError_t out (cudaErrorInvalidValue:
// no kernel for these arguments; cudaErrorNotSupported: not an sm_90 device).
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda {

// Query rows per kv head (q_len * heads / kv_heads) the kernels take.
constexpr int kDecodeClusterMaxRows = 8;

// Whether the current device runs thread-block clusters (sm_90 and later); asked once per device.
bool decode_cluster_available();

// `cluster` blocks per (sequence, kv head): 1, 2, 4, 8 or 16; `warps` per block: 1-8.
cudaError_t decode_cluster_bf16(const FlashArgs& args, int head_dim, int cluster, int warps, cudaStream_t stream);
cudaError_t decode_cluster_f16(const FlashArgs& args, int head_dim, int cluster, int warps, cudaStream_t stream);

}  // namespace tunableop::cuda
