// Cluster decode attention kernels for __nv_bfloat16 (every head dim), and the device check
// shared by both dtypes.
#include "backends/cuda/attention/decode_cluster_launch_impl.cuh"

namespace tunableop::cuda {

bool decode_cluster_available() { return flash_detail::device_has_pdl(); }  // sm_90+: PDL and clusters alike

size_t decode_cluster_workspace_bytes(const FlashArgs& args, int head_dim, int cluster) {
  if (args.splits <= 1) return 0;
  return size_t(decode_cluster_detail::split_workspace_floats(args.splits, args.batch * args.kv_heads, cluster,
                                                              head_dim)) *
         sizeof(float);
}

cudaError_t decode_cluster_bf16(const FlashArgs& args, int head_dim, int cluster, int warps, int stages,
                                unsigned* tickets, cudaStream_t stream) {
  return decode_cluster_detail::launch<__nv_bfloat16>(args, head_dim, cluster, warps, stages, tickets, stream);
}

}  // namespace tunableop::cuda
