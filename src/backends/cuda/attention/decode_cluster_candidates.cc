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

// Split clusters (cluster, warps, splits), for long caches with few kv heads (Gemma-2B's one):
// 128-256 blocks of 2-4 warps. Small blocks on purpose: at ~250 registers per thread a block of
// 4 warps leaves room on its SM for one of the next launch, which (programmatic dependent launch)
// starts its L2 prefetch while this one runs; blocks of 8 warps, or two blocks per SM of one
// launch, lost 4-7 us per call on the H100 (docs/results/attention/notes.md).
// `stages` 2: each warp's next tile in flight while it works on the current one (its K and V
// through shared memory: 32 KB a warp at d256, so blocks of 2 warps there); `_s2` in the name.
// For Llama-2-7B (32 kv heads, one row each): 4-8 blocks of 4 warps per kv head, two stages.
struct SplitShape {
  int cluster, warps, splits, stages;
};
// {8, 4, 15, 2} (session 10, stage12-h200.md): 4 warps of two stages hold 128 KB of Gemma's tiles
// in flight, one block an SM, 15 clusters of 8 (all that fit at once at that size): Gemma's 4k
// decode 10.2 us against 10.8 on the H200. 30 clusters of 4 (two stages or one) and 30 of 8 (one)
// were slower and are not offered.
constexpr SplitShape kSplitShapes[] = {{8, 4, 16, 1},  {16, 4, 8, 1}, {4, 4, 32, 1}, {8, 2, 16, 1}, {16, 2, 8, 1},
                                       {16, 2, 16, 1}, {8, 2, 32, 1}, {16, 2, 8, 2}, {8, 2, 16, 2}, {16, 2, 16, 2},
                                       {2, 4, 2, 2},   {4, 4, 2, 2},  {8, 4, 15, 2}};

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

AttentionCandidate make(int cluster, int warps, int splits, int stages) {
  AttentionCandidate cand;
  cand.name = splits > 1 ? fmt::format("Attn_DecodeCluster_c{}_w{}_sp{}", cluster, warps, splits)
                         : fmt::format("Attn_DecodeCluster_c{}_w{}", cluster, warps);
  if (stages > 1) cand.name += fmt::format("_s{}", stages);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = 0;
  cand.info = CandidateInfo{"tunableop", "decode-cluster", {}};
  cand.info.add("cluster", std::to_string(cluster)).add("warps", std::to_string(warps));
  if (splits > 1) cand.info.add("splits", std::to_string(splits));
  if (stages > 1) cand.info.add("stages", std::to_string(stages));
  cand.supports = [splits](const AttentionParams& p) { return supports(p, splits); };
  cand.workspace_bytes = [cluster, splits](const AttentionParams& p) {
    return decode_cluster_workspace_bytes(flash_args(p, AttentionOperands{}, splits), int(p.head_dim), cluster);
  };
  cand.run = [cluster, warps, splits, stages](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(p, splits));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    FlashArgs a = flash_args(p, o, splits);
    const int d = int(p.head_dim);
    const size_t need = decode_cluster_workspace_bytes(a, d, cluster);
    auto scratch = split_scratch(o, need, size_t(p.batch * p.kv_heads * cluster));
    if (!scratch.is_ok()) return scratch.status();
    a.workspace = scratch->workspace;
    unsigned* tickets = scratch->tickets;
    auto stream = static_cast<cudaStream_t>(o.stream);
    const cudaError_t err = p.dtype == DType::kBF16 ? decode_cluster_bf16(a, d, cluster, warps, stages, tickets, stream)
                                                    : decode_cluster_f16(a, d, cluster, warps, stages, tickets, stream);
    return cuda_status(err, "cluster decode attention launch");
  };
  return cand;
}

}  // namespace

std::vector<AttentionCandidate> decode_cluster_candidates() {
  std::vector<AttentionCandidate> out;
  for (auto [c, w] : kShapes) out.push_back(make(c, w, 1, 1));
  for (const SplitShape& s : kSplitShapes) out.push_back(make(s.cluster, s.warps, s.splits, s.stages));
  return out;
}

}  // namespace tunableop::cuda
