// The launch of the cluster decode kernel for one dtype: the head dim picks the instance; the
// grid is (cluster x splits, batch x kv heads) with clusters of (cluster, 1, 1).
#pragma once

#include "backends/cuda/attention/decode_cluster_kernel.cuh"
#include "backends/cuda/attention/decode_cluster_launch.h"
#include "backends/cuda/attention/flash_launch_impl.cuh"  // device_has_pdl, set_attribute_once

namespace tunableop::cuda::decode_cluster_detail {

template <class T, int D, int kStages>
cudaError_t launch_dim(const FlashArgs& a, int cluster, int warps, unsigned* tickets, cudaStream_t stream) {
  constexpr auto kernel = decode_cluster_kernel<T, D, kStages>;
  using L = Layout<D, kStages>;
  constexpr int kWarpsMax = kStages == 1 ? kMaxWarps : kMaxWarpsTwoStages;
  if (warps > kWarpsMax) return cudaErrorInvalidValue;
  if (cluster > 8) {  // non-portable cluster size: a per-function opt-in
    const cudaError_t err = flash_detail::set_attribute_once<kernel, cudaFuncAttributeNonPortableClusterSizeAllowed>(1);
    if (err != cudaSuccess) return err;
  }
  const int smem = L::bytes(warps);
  if (smem > 48 * 1024) {  // 8 warps at d256, two stages
    const cudaError_t err =
        flash_detail::set_attribute_once<kernel, cudaFuncAttributeMaxDynamicSharedMemorySize>(L::bytes(kWarpsMax));
    if (err != cudaSuccess) return err;
  }
  // A launch without the cluster attribute is a cluster of one block (sm_90), the same kernel.
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = unsigned(cluster);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(cluster * a.splits), unsigned(a.batch * a.kv_heads), 1);
  cfg.blockDim = dim3(unsigned(32 * warps), 1, 1);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 2 : 1;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a, tickets);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_stages(const FlashArgs& a, int cluster, int warps, int stages, unsigned* tickets,
                          cudaStream_t stream) {
  if (stages == 1) return launch_dim<T, D, 1>(a, cluster, warps, tickets, stream);
  if (stages == 2) return launch_dim<T, D, 2>(a, cluster, warps, tickets, stream);
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch(const FlashArgs& a, int head_dim, int cluster, int warps, int stages, unsigned* tickets,
                   cudaStream_t stream) {
  if (!decode_cluster_available()) return cudaErrorNotSupported;
  if (warps < 1 || warps > kMaxWarps || (cluster & (cluster - 1)) != 0 || cluster < 1 || cluster > kMaxCluster)
    return cudaErrorInvalidValue;
  if (a.q_len * (a.heads / a.kv_heads) > kRows) return cudaErrorInvalidValue;
  if (a.splits < 1 || a.splits > kMaxSplits || (a.splits > 1 && (!tickets || !a.workspace)))
    return cudaErrorInvalidValue;
  switch (head_dim) {
    case 64: return launch_stages<T, 64>(a, cluster, warps, stages, tickets, stream);
    case 128: return launch_stages<T, 128>(a, cluster, warps, stages, tickets, stream);
    case 256: return launch_stages<T, 256>(a, cluster, warps, stages, tickets, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda::decode_cluster_detail
