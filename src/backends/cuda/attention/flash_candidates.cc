// Support rules, names and launches of the flash-attention candidates (host C++ only; the
// kernels are in flash_*.cu behind flash_launch.h).
#include "backends/cuda/attention/flash_candidates.h"

#include <fmt/format.h>

#include "backends/cuda/attention/flash_launch.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

constexpr int kSplits[] = {2, 4, 8, 16, 32, 64, 128};

// The compiled configuration of this tile shape for p's head dim (c.head_dim is ignored).
bool find_config(const FlashConfig& c, int64_t head_dim, FlashConfig* found) {
  int n = 0;
  const FlashConfig* cfgs = flash_configs(int(head_dim), &n);
  for (int i = 0; i < n; ++i) {
    if (cfgs[i].rows == c.rows && cfgs[i].keys == c.keys && cfgs[i].warps == c.warps && cfgs[i].stages == c.stages) {
      *found = cfgs[i];
      return true;
    }
  }
  return false;
}

Status supports(const FlashConfig& c, int splits, const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  FlashConfig found;
  if (!find_config(c, p.head_dim, &found))
    return Status::unsupported(fmt::format("tile shape not compiled for head_dim {}", p.head_dim));
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  if (p.batch * p.kv_heads > 65535) return Status::unsupported("batch * kv_heads > 65535 (grid y)");
  if (p.q_len * p.group() > (int64_t(1) << 30) || p.kv_len > (int64_t(1) << 30) || p.pages_per_seq > (1 << 30))
    return Status::unsupported("lengths beyond 2^30");
  if (splits > 1) {
    const int64_t tiles = (p.kv_len + c.keys - 1) / c.keys;
    if (tiles < 2 * splits) return Status::unsupported(fmt::format("fewer than 2 key tiles per split ({})", tiles));
  }
  return Status::ok();
}

AttentionCandidate make(const FlashConfig& c, int splits, int min_effort) {
  AttentionCandidate cand;
  cand.name = splits > 1 ? fmt::format("Attn_SplitKv_q{}_k{}_w{}_s{}_sp{}", c.rows, c.keys, c.warps, c.stages, splits)
                         : fmt::format("Attn_Flash_q{}_k{}_w{}_s{}", c.rows, c.keys, c.warps, c.stages);
  cand.device = DeviceKind::kCuda;
  cand.min_effort = min_effort;
  cand.info = CandidateInfo{"tunableop", splits > 1 ? "split-kv" : "flash", {}};
  cand.info.add("rows", std::to_string(c.rows)).add("keys", std::to_string(c.keys));
  cand.info.add("warps", std::to_string(c.warps)).add("stages", std::to_string(c.stages));
  if (splits > 1) cand.info.add("splits", std::to_string(splits));
  cand.supports = [c, splits](const AttentionParams& p) { return supports(c, splits, p); };
  cand.workspace_bytes = [splits](const AttentionParams& p) {
    return flash_workspace_bytes(flash_args(p, AttentionOperands{}, splits), int(p.head_dim));
  };
  cand.run = [c, splits](const AttentionParams& p, const AttentionOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(c, splits, p));
    if (!aligned16(o.q) || !aligned16(o.k) || !aligned16(o.v) || !aligned16(o.out))
      return Status::unsupported("q, k, v and out must be 16-byte aligned");
    FlashConfig cfg;
    find_config(c, p.head_dim, &cfg);
    FlashArgs a = flash_args(p, o, splits);
    auto ws = operand_workspace(o, flash_workspace_bytes(a, cfg.head_dim));
    if (!ws.is_ok()) return ws.status();
    a.workspace = *ws;
    auto stream = static_cast<cudaStream_t>(o.stream);
    const cudaError_t err =
        p.dtype == DType::kBF16 ? flash_attention_bf16(a, cfg, stream) : flash_attention_f16(a, cfg, stream);
    return cuda_status(err, "flash attention launch");
  };
  return cand;
}

}  // namespace

FlashArgs flash_args(const AttentionParams& p, const AttentionOperands& o, int splits) {
  FlashArgs a;
  a.q = o.q, a.k = o.k, a.v = o.v, a.out = o.out;
  a.block_table = p.paged() ? o.block_table : nullptr;
  a.kv_lens = p.var_kv_len ? o.kv_lens : nullptr;
  a.q_lens = p.var_q_len ? o.q_lens : nullptr;
  a.q_row_stride = p.q_row_stride, a.o_row_stride = p.o_row_stride;
  a.max_seq = p.max_seq;
  a.batch = int(p.batch), a.q_len = int(p.q_len), a.kv_len = int(p.kv_len);
  a.heads = int(p.heads), a.kv_heads = int(p.kv_heads);
  a.page_size = int(p.page_size), a.pages_per_seq = int(p.pages_per_seq);
  a.causal = p.causal ? 1 : 0;
  a.scale = float(p.softmax_scale());
  a.window = p.window < p.kv_len ? int(p.window) : 0;  // a window of every key is none
  a.softcap = float(p.softcap);
  a.splits = splits;
  return a;
}

std::vector<AttentionCandidate> flash_attention_candidates() {
  // One candidate per tile shape (rows, keys, warps, stages); it runs whichever head dim that
  // shape was compiled for.
  std::vector<FlashConfig> shapes;
  for (int d : {64, 128, 256}) {
    int n = 0;
    const FlashConfig* cfgs = flash_configs(d, &n);
    for (int i = 0; i < n; ++i) {
      bool seen = false;
      for (const auto& s : shapes)
        seen = seen || (s.rows == cfgs[i].rows && s.keys == cfgs[i].keys && s.warps == cfgs[i].warps &&
                        s.stages == cfgs[i].stages);
      if (!seen) shapes.push_back(cfgs[i]);
    }
  }
  std::vector<AttentionCandidate> out;
  for (const auto& c : shapes) out.push_back(make(c, 1, c.rows >= 64 ? 0 : 1));
  // Split-KV on the decode-shaped configurations (few rows per block), every split count.
  for (const auto& c : shapes) {
    if (c.rows > 64) continue;
    for (int s : kSplits) out.push_back(make(c, s, s <= 16 ? 0 : 1));
  }
  return out;
}

}  // namespace tunableop::cuda
