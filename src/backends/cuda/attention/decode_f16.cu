// One-launch decode attention kernels for __half (every head dim and row count).
#include "backends/cuda/attention/decode_launch_impl.cuh"

namespace tunableop::cuda {

cudaError_t decode_attention_f16(const FlashArgs& args, int head_dim, int warps, unsigned* tickets,
                                 cudaStream_t stream) {
  return decode_detail::launch<__half>(args, head_dim, warps, tickets, stream);
}

}  // namespace tunableop::cuda
