// Support rules, names and launches of the cluster decode candidates (host C++ only; the kernels
// are in decode_cluster_*.cu behind decode_cluster_launch.h).
#include "backends/cuda/attention/decode_cluster_candidates.h"

#include <fmt/format.h>

#include <utility>

#include "backends/cuda/attention/decode_cluster_launch.h"
#include "backends/cuda/attention/flash_candidates.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

// One block of 8 warps (no cluster) up to 16 blocks of 1-4 warps: 16-key tiles over C x W warps.
constexpr std::pair<int, int> kShapes[] = {{1, 4}, {1, 8}, {2, 4}, {2, 8},  {4, 1},  {4, 2}, {4, 4},
                                           {8, 1}, {8, 2}, {8, 4}, {16, 1}, {16, 2}, {16, 4}};

Status supports(const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    return Status::unsupported("head_dim 64, 128 or 256 only");
  if (p.q_len * p.group() > kDecodeClusterMaxRows)
    return Status::unsupported(fmt::format("more than {} query rows per kv head", kDecodeClusterMaxRows));
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  if (p.batch * p.kv_heads > 65535) return Status::unsupported("batch * kv_heads > 65535 (grid y)");
  if (p.kv_len > (int64_t(1) << 30) || p.pages_per_seq > (1 << 30)) return Status::unsupported("lengths beyond 2^30");
  if (!decode_cluster_available()) return Status::unsupported("thread-block clusters need an sm_90 device");
  return Status::ok();
}

AttentionCandidate make(int cluster, int warps) {
  AttentionCandidate cand;
  cand.name = fmt::format("Attn_DecodeCluster_c{}_w{}", cluster, warps);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = 0;
  cand.info = CandidateInfo{"tunableop", "decode-cluster", {}};
  cand.info.add("cluster", std::to_string(cluster)).add("warps", std::to_string(warps));
  cand.supports = [](const AttentionParams& p) { return supports(p); };
  cand.workspace_bytes = [](const AttentionParams&) { return size_t(0); };
  cand.run = [cluster, warps](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(p));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    const FlashArgs a = flash_args(p, o, 1);
    auto stream = static_cast<cudaStream_t>(o.stream);
    const int d = int(p.head_dim);
    const cudaError_t err = p.dtype == DType::kBF16 ? decode_cluster_bf16(a, d, cluster, warps, stream)
                                                    : decode_cluster_f16(a, d, cluster, warps, stream);
    return cuda_status(err, "cluster decode attention launch");
  };
  return cand;
}

}  // namespace

std::vector<AttentionCandidate> decode_cluster_candidates() {
  std::vector<AttentionCandidate> out;
  for (auto [c, w] : kShapes) out.push_back(make(c, w));
  return out;
}

}  // namespace tunableop::cuda
