#include "llm/engine_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "tunableop/checked_size.h"

namespace tunableop::llm {

namespace {

// Elements of a prefill's per-token activations (residual, norms, qkv, attention, MLP) over
// `rows` tokens, plus prefill attention's scores and permuted q/out for `batch` sequences of
// `seq` positions.
CheckedInt prefill_elems(const ModelConfig& c, CheckedInt batch, CheckedInt seq) {
  const CheckedInt H = c.hidden_size, I = c.intermediate_size;
  const CheckedInt Q = CheckedInt(c.num_heads) * c.head_dim, KV = CheckedInt(c.num_kv_heads) * c.head_dim;
  return batch * seq * (H * 3 + Q + KV * 2 + Q + I * 3) +
         batch * c.num_heads * seq * (seq + CheckedInt(c.head_dim) * 2);
}

}  // namespace

Status check_engine_fits(const ModelConfig& c, const EngineOptions& o, size_t elem_bytes, bool host_memory) {
  if (o.max_seq < 1) return Status::invalid_argument(fmt::format("max_seq must be >= 1 (got {})", o.max_seq));
  if (o.max_batch < 1) return Status::invalid_argument(fmt::format("max_batch must be >= 1 (got {})", o.max_batch));
  if (o.decode_bucket_step < 0)
    return Status::invalid_argument(
        fmt::format("decode_bucket_step must be >= 0 (0: powers of two; got {})", o.decode_bucket_step));
  if (o.pad_multiple < 1 || o.pad_multiple > o.max_seq) {
    return Status::invalid_argument(
        fmt::format("pad_multiple ({}) must be between 1 and max_seq ({})", o.pad_multiple, o.max_seq));
  }
  TUNABLEOP_RETURN_IF_ERROR(o.kv_cache.validate());
  const CheckedInt S = o.max_seq, B = o.max_batch, V = c.vocab_size;
  const CheckedInt KV = CheckedInt(c.num_kv_heads) * c.head_dim;
  // Positions the KV cache holds: static, max_batch x max_seq; paged, its pool of pages (by
  // default enough for max_batch full sequences; page numbers are int32) plus a block table of
  // max_batch x pages-per-sequence int32 entries.
  CheckedInt kv_positions = B * S, table_elems = 0;
  if (o.kv_cache.kind == KvCacheKind::kPaged) {
    const int64_t page = o.kv_cache.page_size, per_seq = o.max_seq / page + (o.max_seq % page != 0);
    const CheckedInt pages = o.kv_cache.pages > 0 ? CheckedInt(o.kv_cache.pages) : B * per_seq;
    if (!pages.ok() || pages.value() > std::numeric_limits<int32_t>::max()) {
      return Status::invalid_argument(fmt::format("a paged KV cache of {} pages: at most {} pages", pages.value(),
                                                  std::numeric_limits<int32_t>::max()));
    }
    kv_positions = pages * page;
    table_elems = B * per_seq;
  }
  // Allocated when the engine is made: the KV cache, the RoPE table, the logits (and a paged
  // cache's block table, counted in bytes below).
  const CheckedInt upfront = CheckedInt(2) * c.num_layers * KV * kv_positions + S * c.head_dim + B * V;
  // Grown by the longest prompt, at most max_seq per sequence: per-token activations (residual,
  // norms, qkv, attention, MLP) and prefill attention's scores and permuted q/out. They only have
  // to be countable here; their memory is what the prompt asks for, not what max_seq allows.
  const CheckedInt per_prompt = prefill_elems(c, B, S);
  const CheckedInt elems = upfront + per_prompt + table_elems;
  const std::string what = fmt::format(
      "the engine's KV cache and buffers for {} sequence{} of {} positions ({} cache, {} layers, {} kv "
      "heads of {})",
      o.max_batch, o.max_batch == 1 ? "" : "s", o.max_seq, kv_cache_kind_name(o.kv_cache.kind), c.num_layers,
      c.num_kv_heads, c.head_dim);
  if (!elems.ok() || !checked_bytes(elems.value(), elem_bytes)) {
    return Status::invalid_argument(what + " need more bytes than a 64-bit count can hold: lower max_seq or the batch");
  }
  const CheckedInt bytes = upfront * int64_t(elem_bytes) + table_elems * int64_t(sizeof(int32_t));
  if (host_memory) return check_host_allocation(bytes, what);
  return Status::ok();
}

Status check_run_fits(const ModelConfig& c, const EngineOptions& o, int64_t prompt_tokens, size_t elem_bytes,
                      uint64_t resident_bytes, int ranks_here) {
  TUNABLEOP_RETURN_IF_ERROR(check_engine_fits(c, o, elem_bytes, /*host_memory=*/true));
  const CheckedInt B = o.max_batch, S = o.max_seq, P = std::max<int64_t>(prompt_tokens, 1);
  CheckedInt kv_positions = B * S;
  if (o.kv_cache.kind == KvCacheKind::kPaged && o.kv_cache.pages > 0)
    kv_positions = CheckedInt(o.kv_cache.pages) * o.kv_cache.page_size;
  const CheckedInt elems = CheckedInt(2) * c.num_layers * CheckedInt(c.num_kv_heads) * c.head_dim * kv_positions +
                           S * c.head_dim + B * c.vocab_size + prefill_elems(c, B, P);
  const CheckedInt rank_bytes =
      elems * int64_t(elem_bytes) + CheckedInt(int64_t(std::min<uint64_t>(resident_bytes, INT64_MAX)));
  const int ranks = std::max(ranks_here, 1);
  return check_available_memory(
      rank_bytes * int64_t(ranks),
      fmt::format("a prefill of {} sequence{} of {} tokens (the KV cache, activations and attention scores{}{})",
                  o.max_batch, o.max_batch == 1 ? "" : "s", prompt_tokens,
                  resident_bytes > 0 ? (ranks > 1 ? ", and the weights" : ", and the model's weights") : "",
                  ranks > 1 ? fmt::format(", for each of the {} tensor-parallel ranks on this host", ranks) : ""));
}

}  // namespace tunableop::llm
