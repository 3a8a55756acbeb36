// The launch of the one-launch decode kernel for one dtype: head dim and row count (the next
// power of two at or above q_len * group, within the register budget) pick the instance.
#pragma once

#include "backends/cuda/attention/decode_kernel.cuh"
#include "backends/cuda/attention/decode_launch.h"
#include "backends/cuda/attention/flash_launch_impl.cuh"  // device_has_pdl

namespace tunableop::cuda::decode_detail {

template <class T, int D, int R>
cudaError_t launch_rows(const FlashArgs& a, int warps, unsigned* tickets, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(a.splits), unsigned(a.batch * a.kv_heads), 1);
  cfg.blockDim = dim3(unsigned(32 * warps), 1, 1);
  cfg.stream = stream;
  const bool pdl = flash_detail::device_has_pdl();
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, decode_attention_kernel<T, D, R>, a, tickets);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_dim(const FlashArgs& a, int warps, unsigned* tickets, cudaStream_t stream) {
  const int rows = a.q_len * (a.heads / a.kv_heads);
  if (rows <= 1) return launch_rows<T, D, 1>(a, warps, tickets, stream);
  if (rows <= 2) return launch_rows<T, D, 2>(a, warps, tickets, stream);
  if (rows <= 4) return launch_rows<T, D, 4>(a, warps, tickets, stream);
  if (rows <= 8) return launch_rows<T, D, 8>(a, warps, tickets, stream);
  if constexpr (D <= 128) {
    if (rows <= 16) return launch_rows<T, D, 16>(a, warps, tickets, stream);
  }
  if constexpr (D <= 64) {
    if (rows <= 32) return launch_rows<T, D, 32>(a, warps, tickets, stream);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch(const FlashArgs& a, int head_dim, int warps, unsigned* tickets, cudaStream_t stream) {
  if (warps < 1 || warps > kMaxWarps || a.splits < 1 || a.splits > kMaxSplits) return cudaErrorInvalidValue;
  if (a.splits > 1 && (!tickets || !a.workspace)) return cudaErrorInvalidValue;
  switch (head_dim) {
    case 64: return launch_dim<T, 64>(a, warps, tickets, stream);
    case 128: return launch_dim<T, 128>(a, warps, tickets, stream);
    case 256: return launch_dim<T, 256>(a, warps, tickets, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda::decode_detail
