// Cluster decode attention kernels for __half (every head dim).
#include "backends/cuda/attention/decode_cluster_launch_impl.cuh"

namespace tunableop::cuda {

cudaError_t decode_cluster_f16(const FlashArgs& args, int head_dim, int cluster, int warps, int stages,
                               unsigned* tickets, cudaStream_t stream) {
  return decode_cluster_detail::launch<__half>(args, head_dim, cluster, warps, stages, tickets, stream);
}

}  // namespace tunableop::cuda
