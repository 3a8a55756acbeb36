// One-launch decode attention kernels for __nv_bfloat16 (every head dim and row count), and the
// row limits shared by both dtypes.
#include "backends/cuda/attention/decode_launch_impl.cuh"

namespace tunableop::cuda {

int decode_attention_max_rows(int head_dim) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) return 0;
  return decode_detail::kRowDims / head_dim;
}

cudaError_t decode_attention_bf16(const FlashArgs& args, int head_dim, int warps, unsigned* tickets,
                                  cudaStream_t stream) {
  return decode_detail::launch<__nv_bfloat16>(args, head_dim, warps, tickets, stream);
}

}  // namespace tunableop::cuda
