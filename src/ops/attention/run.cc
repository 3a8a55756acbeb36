// run_attention before the tunable op: a fixed preference over the registered candidates.
#include "ops/attention/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace tunableop {

namespace {

// Decode: splits so that batch * kv_heads * splits comes near 256 blocks (two waves on a
// 132-SM GPU), each split keeping at least two 64-key tiles of the longest sequence.
int decode_splits(const AttentionParams& p) {
  const int64_t blocks = p.batch * p.kv_heads;
  const int64_t tiles = (p.kv_len + 63) / 64;
  int s = 1;
  while (s < 128 && blocks * s * 2 <= 256 && int64_t(s) * 2 * 2 <= tiles) s *= 2;
  return s;
}

std::vector<std::string> cuda_preference(const AttentionParams& p) {
  std::vector<std::string> names;
  if (p.dtype == DType::kF32) return {"Default"};
  if (p.q_len > 16) {
    names.push_back("Attn_Cudnn_Sdpa");
    names.push_back(p.head_dim == 256   ? "Attn_Flash_q64_k64_w4_s2"
                    : p.head_dim == 128 ? "Attn_Flash_q128_k64_w8_s2"
                                        : "Attn_Flash_q128_k64_w4_s2");
    names.push_back("Attn_Flash_q64_k64_w4_s2");
  } else {
    for (int s = decode_splits(p); s > 1; s /= 2) names.push_back(fmt::format("Attn_SplitKv_q64_k64_w4_s2_sp{}", s));
    names.push_back("Attn_Flash_q64_k64_w4_s2");
  }
  names.push_back("Default");
  return names;
}

std::vector<std::string> cpu_preference() { return {"Attn_Cpu_Fused_q16_k64", "Attn_Cpu_Math"}; }

}  // namespace

StatusOr<const AttentionCandidate*> choose_attention(Context& ctx, const AttentionParams& params) {
  const AttentionParams p = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  const DeviceKind kind = ctx.device().kind;
  const std::vector<AttentionCandidate>* list = ctx.registry().find_list<AttentionCandidate>();
  if (!list) return Status::unsupported("attention: no candidates registered");
  const std::vector<std::string> names = kind == DeviceKind::kCuda ? cuda_preference(p) : cpu_preference();
  std::string why;
  for (const std::string& name : names) {
    for (const AttentionCandidate& c : *list) {
      if (c.device != kind || c.name != name) continue;
      Status st = c.supports(p);
      if (st.is_ok()) return &c;
      why += fmt::format("; {}: {}", c.name, st.message());
    }
  }
  // Anything else of this device that takes the problem.
  for (const AttentionCandidate& c : *list)
    if (c.device == kind && c.supports(p).is_ok()) return &c;
  return Status::unsupported(fmt::format("attention: no candidate on {} for {},{}{}", ctx.device().to_string(),
                                         attention_op_signature(p), attention_params_signature(p), why));
}

Status run_attention(Context& ctx, const AttentionParams& params, const AttentionOperands& o) {
  const AttentionParams p = params.with_defaults();
  auto c = choose_attention(ctx, p);
  if (!c.is_ok()) return c.status();
  return (*c)->run(p, o);
}

}  // namespace tunableop
