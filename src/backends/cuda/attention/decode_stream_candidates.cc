// Support rules, names and launches of the streaming decode candidates (host C++ only; the
// kernels are in decode_stream_*.cu behind decode_stream_launch.h).
#include "backends/cuda/attention/decode_stream_candidates.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/attention/decode_cluster_launch.h"  // decode_cluster_available
#include "backends/cuda/attention/decode_stream_launch.h"
#include "backends/cuda/attention/flash_candidates.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

// (cluster, keys, stages, warps, splits). A cluster's blocks share a GPC; on an H200 (measured
// with cudaOccupancyMaxActiveClusters) clusters of 2 fill all 132 SMs at any blocks per SM, while
// only 30 clusters of 8 fit at two blocks an SM and 30 of 4 at one; clusters of 8 at three an SM
// all fit but leave some SMs three blocks and others one (24 us against 22 for Llama's 4k decode).
// So for Llama-2-7B's decode (32 kv heads of one row, d128): 4 clusters of 2 per kv head, 256
// blocks, two an SM (rings of 96 KB: a third block never fits; at 64 KB some SMs took three and the
// call 25 us instead of 22), or 8 clusters of 2 at 48 KB. For batches (8 sequences x 32 kv heads):
// one cluster of 2.
constexpr DecodeStreamConfig kConfigs[] = {{2, 16, 12, 4, 4}, {2, 32, 6, 3, 4}, {2, 16, 12, 6, 4},
                                           {2, 32, 6, 6, 4},  {2, 16, 6, 3, 8}, {2, 32, 8, 4, 1}};

Status supports(const AttentionParams& p, const DecodeStreamConfig& c) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  if (p.window > 0) return Status::unsupported("no sliding window (its chunks start at key 0)");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return Status::unsupported("head_dim 64, 128 or 256 only");
  const int64_t rows = p.q_len * p.group();
  if (decode_stream_rows(int(std::min<int64_t>(rows, 1 << 20))) == 0 || rows * p.head_dim > kDecodeStreamMaxRowDims)
    return Status::unsupported(
        fmt::format("{} query rows per kv head at d{} (at most 4, and 512 row dims)", rows, p.head_dim));
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  if (p.batch * p.kv_heads > 65535) return Status::unsupported("batch * kv_heads > 65535 (grid y)");
  if (p.kv_len > (int64_t(1) << 30) || p.pages_per_seq > (1 << 30)) return Status::unsupported("lengths beyond 2^30");
  if ((p.kv_len + c.keys - 1) / c.keys < int64_t(c.cluster) * c.splits)
    return Status::unsupported(
        fmt::format("fewer chunks of {} keys than the {} blocks per kv head", c.keys, c.cluster * c.splits));
  const size_t smem = decode_stream_smem_bytes(c, int(p.head_dim), int(rows), 2);
  if (smem > 227 * 1024) return Status::unsupported(fmt::format("{} bytes of shared memory a block", smem));
  if (!decode_cluster_available()) return Status::unsupported("bulk copies and clusters need an sm_90 device");
  return Status::ok();
}

AttentionCandidate make(const DecodeStreamConfig& c) {
  AttentionCandidate cand;
  cand.name = fmt::format("Attn_DecodeStream_c{}_k{}_s{}_w{}", c.cluster, c.keys, c.stages, c.warps);
  if (c.splits > 1) cand.name += fmt::format("_sp{}", c.splits);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = 0;
  cand.info = CandidateInfo{"tunableop", "decode-stream", {}};
  cand.info.add("cluster", std::to_string(c.cluster)).add("keys", std::to_string(c.keys));
  cand.info.add("stages", std::to_string(c.stages)).add("warps", std::to_string(c.warps));
  if (c.splits > 1) cand.info.add("splits", std::to_string(c.splits));
  cand.supports = [c](const AttentionParams& p) { return supports(p, c); };
  cand.workspace_bytes = [c](const AttentionParams& p) {
    return decode_stream_workspace_bytes(flash_args(p, AttentionOperands{}, c.splits), int(p.head_dim), c.cluster);
  };
  cand.run = [c](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(p, c));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    FlashArgs a = flash_args(p, o, c.splits);
    const int d = int(p.head_dim);
    const size_t need = decode_stream_workspace_bytes(a, d, c.cluster);
    auto scratch = split_scratch(o, need, size_t(p.batch * p.kv_heads * c.cluster));
    if (!scratch.is_ok()) return scratch.status();
    a.workspace = scratch->workspace;
    unsigned* tickets = scratch->tickets;
    auto stream = static_cast<cudaStream_t>(o.stream);
    const cudaError_t err = p.dtype == DType::kBF16 ? decode_stream_bf16(a, d, c, tickets, stream)
                                                    : decode_stream_f16(a, d, c, tickets, stream);
    return cuda_status(err, "streaming decode attention launch");
  };
  return cand;
}

}  // namespace

std::vector<AttentionCandidate> decode_stream_candidates() {
  std::vector<AttentionCandidate> out;
  for (const DecodeStreamConfig& c : kConfigs) out.push_back(make(c));
  return out;
}

}  // namespace tunableop::cuda
