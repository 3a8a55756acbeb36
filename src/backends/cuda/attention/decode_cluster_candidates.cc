// Support rules, names and launches of the cluster decode candidates (host C++ only; the kernels
// are in decode_cluster_*.cu behind decode_cluster_launch.h).
#include "backends/cuda/attention/decode_cluster_candidates.h"

#include <fmt/format.h>

#include <utility>

#include "backends/cuda/attention/decode_cluster_launch.h"
#include "backends/cuda/attention/flash_candidates.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

// One block of 8 warps (no cluster) up to 16 blocks of 1-4 warps: 16-key tiles over C x W warps.
constexpr std::pair<int, int> kShapes[] = {{1, 4}, {1, 8}, {2, 4}, {2, 8},  {4, 1},  {4, 2}, {4, 4},
                                           {8, 1}, {8, 2}, {8, 4}, {16, 1}, {16, 2}, {16, 4}};

// Split clusters (cluster, warps, splits), for long caches: one wave of 128-256 blocks (8 warps:
// one block per SM at ~250 registers; 4 warps: two) for one kv head (Gemma-2B) or for 32
// (Llama-2-7B: C x S = 4 or 8).
struct SplitShape {
  int cluster, warps, splits;
};
constexpr SplitShape kSplitShapes[] = {{1, 8, 4},  {2, 8, 2},  {4, 4, 2},  {2, 4, 4},  {8, 8, 16},
                                       {8, 4, 16}, {8, 4, 32}, {4, 8, 32}, {16, 4, 8}, {4, 4, 64}};

Status supports(const AttentionParams& p, int splits) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return Status::unsupported("head_dim 64, 128 or 256 only");
  if (p.q_len * p.group() > kDecodeClusterMaxRows)
    return Status::unsupported(fmt::format("more than {} query rows per kv head", kDecodeClusterMaxRows));
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  if (p.batch * p.kv_heads > 65535) return Status::unsupported("batch * kv_heads > 65535 (grid y)");
  if (p.kv_len > (int64_t(1) << 30) || p.pages_per_seq > (1 << 30)) return Status::unsupported("lengths beyond 2^30");
  if (splits > 1 && (p.kv_len + 15) / 16 < 2 * splits)
    return Status::unsupported(fmt::format("fewer than 2 key tiles of 16 per split ({})", (p.kv_len + 15) / 16));
  if (!decode_cluster_available()) return Status::unsupported("thread-block clusters need an sm_90 device");
  return Status::ok();
}

AttentionCandidate make(int cluster, int warps, int splits) {
  AttentionCandidate cand;
  cand.name = splits > 1 ? fmt::format("Attn_DecodeCluster_c{}_w{}_sp{}", cluster, warps, splits)
                         : fmt::format("Attn_DecodeCluster_c{}_w{}", cluster, warps);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = 0;
  cand.info = CandidateInfo{"tunableop", "decode-cluster", {}};
  cand.info.add("cluster", std::to_string(cluster)).add("warps", std::to_string(warps));
  if (splits > 1) cand.info.add("splits", std::to_string(splits));
  cand.supports = [splits](const AttentionParams& p) { return supports(p, splits); };
  cand.workspace_bytes = [cluster, splits](const AttentionParams& p) {
    return decode_cluster_workspace_bytes(flash_args(p, AttentionOperands{}, splits), int(p.head_dim), cluster);
  };
  cand.run = [cluster, warps, splits](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(p, splits));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    FlashArgs a = flash_args(p, o, splits);
    unsigned* tickets = nullptr;
    const int d = int(p.head_dim);
    const size_t need = decode_cluster_workspace_bytes(a, d, cluster);
    if (need > 0) {
      if (o.workspace && o.workspace_bytes >= need && aligned16(o.workspace)) {
        a.workspace = o.workspace;
      } else {
        auto ws = attention_workspace(need, o.stream);
        if (!ws.is_ok()) return ws.status();
        a.workspace = *ws;
      }
      auto t = decode_tickets(size_t(p.batch * p.kv_heads * cluster), o.stream);
      if (!t.is_ok()) return t.status();
      tickets = *t;
    }
    auto stream = static_cast<cudaStream_t>(o.stream);
    const cudaError_t err = p.dtype == DType::kBF16 ? decode_cluster_bf16(a, d, cluster, warps, tickets, stream)
                                                    : decode_cluster_f16(a, d, cluster, warps, tickets, stream);
    return cuda_status(err, "cluster decode attention launch");
  };
  return cand;
}

}  // namespace

std::vector<AttentionCandidate> decode_cluster_candidates() {
  std::vector<AttentionCandidate> out;
  for (auto [c, w] : kShapes) out.push_back(make(c, w, 1));
  for (const SplitShape& s : kSplitShapes) out.push_back(make(s.cluster, s.warps, s.splits));
  return out;
}

}  // namespace tunableop::cuda
