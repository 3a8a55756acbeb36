#include "llm/layer_attention.h"

#include <algorithm>

#include "tunableop/attention.h"

namespace tunableop::llm {

StatusOr<LayerAttention> layer_attention(const ModelConfig& c, DType dtype, const Pass& p, int64_t layer,
                                         const void* qkv, KvCache& cache, void* out) {
  LayerAttention a;
  AttentionParams& ap = a.params;
  AttentionOperands& o = a.operands;
  ap.dtype = dtype;
  ap.causal = true;
  ap.batch = p.batch;
  ap.heads = c.num_heads;
  ap.kv_heads = c.num_kv_heads;
  ap.head_dim = c.head_dim;
  ap.q_row_stride = c.qkv_dim();  // q heads lead each fused qkv row
  ap.o_row_stride = c.q_dim();
  // The family's attention: Gemma-2's scale and softcap.
  ap.scale = c.attention_scale();
  ap.softcap = c.attn_logit_softcapping;
  o.q = qkv;
  o.out = out;
  if (cache.kind() == KvCacheKind::kPaged) {
    const auto& pc = static_cast<const PagedKvCache&>(cache);
    const PagedKvCache::Geometry& g = pc.geometry();
    ap.page_size = g.page_size;
    ap.pages_per_seq = g.pages_per_seq();
    ap.num_pages = g.pages;
    o.k = pc.k(layer);
    o.v = pc.v(layer);
    o.block_table = p.block_table ? p.block_table : pc.block_table();
  } else {
    auto sc = as_static(cache, "attention");
    if (!sc.is_ok()) return sc.status();
    ap.max_seq = (*sc)->max_seq();
    o.k = (*sc)->k(layer);
    o.v = (*sc)->v(layer);
  }
  if (p.phase == Phase::kPrefill && p.q_lens) {  // chunked: queries after a cached prefix
    ap.q_len = p.tokens;
    ap.kv_len = std::max(p.kv_len, p.tokens);
    ap.var_q_len = ap.var_kv_len = true;
    o.q_lens = p.q_lens;
    o.kv_lens = p.seq_lens;
  } else if (p.phase == Phase::kPrefill) {
    ap.q_len = ap.kv_len = p.tokens;
    if (p.ragged) {
      ap.var_q_len = ap.var_kv_len = true;
      o.q_lens = o.kv_lens = p.seq_lens;
    }
  } else {
    ap.q_len = 1;
    ap.kv_len = cache.max_seq();
    ap.var_kv_len = true;
    o.kv_lens = p.seq_lens;
  }
  // The layer's sliding window, unless the problem has no more keys than it (then it changes
  // nothing, and the problem stays the plain one: a prompt shorter than the window, say).
  const int64_t window = c.layer_window(layer);
  if (window > 0 && window < ap.kv_len) ap.window = window;
  return a;
}

StatusOr<std::string> tune_decode_attention(Context& ctx, const AttentionParams& params, void* stream) {
  // The problem's plan, decided now: the context's decision as any run makes it (results loaded,
  // a hit, Default when off or not tuning), except that a miss is tuned on random operands at
  // full length, made only then.
  auto plan = make_plan(ctx, params);
  if (!plan.is_ok()) return plan.status();
  auto decision = plan->prepare(stream);
  if (!decision.is_ok()) return decision.status();
  return *decision ? (*decision)->solution : std::string("Default");
}

}  // namespace tunableop::llm
