// The launch of the streaming decode kernel for one dtype: head dim and rows pick the instance;
// the grid is (cluster x splits, batch x kv heads) with clusters of (cluster, 1, 1).
#pragma once

#include "backends/cuda/attention/decode_stream_kernel.cuh"
#include "backends/cuda/attention/decode_stream_launch.h"
#include "backends/cuda/attention/flash_launch_impl.cuh"  // device_has_pdl, set_attribute_once

namespace tunableop::cuda::decode_stream_detail {

template <class T, int D, int kRows>
cudaError_t launch_rows(const FlashArgs& a, const DecodeStreamConfig& c, unsigned* tickets, cudaStream_t stream) {
  constexpr auto kernel = decode_stream_kernel<T, D, kRows>;
  cudaError_t err = flash_detail::set_attribute_once<kernel, cudaFuncAttributeMaxDynamicSharedMemorySize>(kMaxSmem);
  if (err != cudaSuccess) return err;
  const Layout layout{D, kRows, c.keys, c.stages, c.warps, int(sizeof(T))};
  if (layout.bytes() > kMaxSmem) return cudaErrorInvalidValue;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = unsigned(c.cluster);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(c.cluster * a.splits), unsigned(a.batch * a.kv_heads), 1);
  cfg.blockDim = dim3(unsigned(32 * (c.warps + 1)), 1, 1);
  cfg.dynamicSmemBytes = size_t(layout.bytes());
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  err = cudaLaunchKernelEx(&cfg, kernel, a, c.keys, c.stages, tickets);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_dim(const FlashArgs& a, const DecodeStreamConfig& c, unsigned* tickets, cudaStream_t stream) {
  switch (decode_stream_rows(a.q_len * (a.heads / a.kv_heads))) {
    case 1: return launch_rows<T, D, 1>(a, c, tickets, stream);
    case 2: return launch_rows<T, D, 2>(a, c, tickets, stream);
    case 4:
      if constexpr (4 * D <= kDecodeStreamMaxRowDims) return launch_rows<T, D, 4>(a, c, tickets, stream);
      break;
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch(const FlashArgs& a, int head_dim, const DecodeStreamConfig& c, unsigned* tickets,
                   cudaStream_t stream) {
  if (!flash_detail::device_has_pdl()) return cudaErrorNotSupported;
  const bool pow2 = c.cluster >= 2 && c.cluster <= kMaxCluster && (c.cluster & (c.cluster - 1)) == 0;
  if (!pow2 || c.warps < 1 || c.warps > kMaxWarps || c.stages < 2 || c.stages > kMaxStages || c.keys < 16 ||
      c.keys % 16 != 0 || c.stages % c.warps != 0)
    return cudaErrorInvalidValue;
  if (a.q_len * (a.heads / a.kv_heads) * head_dim > kDecodeStreamMaxRowDims) return cudaErrorInvalidValue;
  if (a.splits < 1 || a.splits > 256 || (a.splits > 1 && (!tickets || !a.workspace))) return cudaErrorInvalidValue;
  switch (head_dim) {
    case 64: return launch_dim<T, 64>(a, c, tickets, stream);
    case 128: return launch_dim<T, 128>(a, c, tickets, stream);
    case 256: return launch_dim<T, 256>(a, c, tickets, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda::decode_stream_detail
