// Streaming decode attention kernels for __half (every head dim).
#include "backends/cuda/attention/decode_stream_launch_impl.cuh"

namespace tunableop::cuda {

cudaError_t decode_stream_f16(const FlashArgs& args, int head_dim, const DecodeStreamConfig& config, unsigned* tickets,
                              cudaStream_t stream) {
  return decode_stream_detail::launch<__half>(args, head_dim, config, tickets, stream);
}

}  // namespace tunableop::cuda
