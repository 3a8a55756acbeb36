// Support rules, names and launches of the one-launch decode candidates (host C++ only; the
// kernels are in decode_*.cu behind decode_launch.h).
#include "backends/cuda/attention/decode_candidates.h"

#include <fmt/format.h>

#include "backends/cuda/attention/decode_launch.h"
#include "backends/cuda/attention/flash_candidates.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

constexpr int kWarps[] = {2, 4, 8};
constexpr int kSplits[] = {1, 2, 4, 8, 16, 32};

Status supports(int splits, const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  const int max_rows = decode_attention_max_rows(int(p.head_dim));
  if (max_rows == 0) return Status::unsupported("head_dim 64, 128 or 256 only");
  if (p.q_len * p.group() > max_rows)
    return Status::unsupported(fmt::format("more than {} query rows per kv head at head_dim {}", max_rows, p.head_dim));
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  if (p.batch * p.kv_heads > 65535) return Status::unsupported("batch * kv_heads > 65535 (grid y)");
  if (p.kv_len > (int64_t(1) << 30) || p.pages_per_seq > (1 << 30)) return Status::unsupported("lengths beyond 2^30");
  if (splits > 1 && p.kv_len < 2 * splits) return Status::unsupported(fmt::format("fewer than 2 keys per split"));
  return Status::ok();
}

AttentionCandidate make(int warps, int splits) {
  AttentionCandidate cand;
  cand.name = fmt::format("Attn_DecodeOneLaunch_w{}_sp{}", warps, splits);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = 0;
  cand.info = CandidateInfo{"tunableop", "decode-one-launch", {}};
  cand.info.add("warps", std::to_string(warps)).add("splits", std::to_string(splits));
  cand.supports = [splits](const AttentionParams& p) { return supports(splits, p); };
  cand.workspace_bytes = [splits](const AttentionParams& p) {
    return flash_workspace_bytes(flash_args(p, AttentionOperands{}, splits), int(p.head_dim));
  };
  cand.run = [warps, splits](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(splits, p));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    FlashArgs a = flash_args(p, o, splits);
    const size_t need = flash_workspace_bytes(a, int(p.head_dim));
    auto scratch = split_scratch(o, need, size_t(p.batch * p.kv_heads));
    if (!scratch.is_ok()) return scratch.status();
    a.workspace = scratch->workspace;
    unsigned* tickets = scratch->tickets;
    auto stream = static_cast<cudaStream_t>(o.stream);
    const int d = int(p.head_dim);
    const cudaError_t err = p.dtype == DType::kBF16 ? decode_attention_bf16(a, d, warps, tickets, stream)
                                                    : decode_attention_f16(a, d, warps, tickets, stream);
    return cuda_status(err, "decode attention launch");
  };
  return cand;
}

}  // namespace

std::vector<AttentionCandidate> decode_attention_candidates() {
  std::vector<AttentionCandidate> out;
  for (int s : kSplits)
    for (int w : kWarps) out.push_back(make(w, s));
  return out;
}

}  // namespace tunableop::cuda
