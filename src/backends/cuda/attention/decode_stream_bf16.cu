// Streaming decode attention kernels for __nv_bfloat16 (every head dim), and the host-side
// helpers shared by both dtypes.
#include "backends/cuda/attention/decode_stream_launch_impl.cuh"

namespace tunableop::cuda {

int decode_stream_rows(int rows) { return rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : 0; }

size_t decode_stream_smem_bytes(const DecodeStreamConfig& c, int head_dim, int rows, int elem_bytes) {
  const decode_stream_detail::Layout layout{head_dim, decode_stream_rows(rows), c.keys, c.stages, c.warps, elem_bytes};
  return size_t(layout.bytes());
}

size_t decode_stream_workspace_bytes(const FlashArgs& args, int head_dim, int cluster) {
  if (args.splits <= 1) return 0;
  const int rows = decode_stream_rows(args.q_len * (args.heads / args.kv_heads));
  return size_t(decode_stream_detail::split_workspace_floats(args.splits, args.batch * args.kv_heads, cluster, rows,
                                                             head_dim)) *
         sizeof(float);
}

cudaError_t decode_stream_bf16(const FlashArgs& args, int head_dim, const DecodeStreamConfig& config, unsigned* tickets,
                               cudaStream_t stream) {
  return decode_stream_detail::launch<__nv_bfloat16>(args, head_dim, config, tickets, stream);
}

}  // namespace tunableop::cuda
