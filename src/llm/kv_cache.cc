#include "llm/kv_cache.h"

namespace tunableop::llm {

StaticKvCache::StaticKvCache(KvLayout layout, int64_t max_batch, size_t elem_bytes, Buffer k, Buffer v)
    : layout_(layout), max_batch_(max_batch), elem_bytes_(elem_bytes), k_(std::move(k)), v_(std::move(v)) {}

size_t StaticKvCache::bytes_needed(const KvLayout& layout, int64_t max_batch, int64_t layers, size_t elem_bytes) {
  return size_t(layers * max_batch * layout.n_kv_heads * layout.max_seq * layout.head_dim) * elem_bytes;
}

Status StaticKvCache::reserve(int64_t seq, int64_t positions) {
  if (seq < 0 || seq >= max_batch_) {
    return Status::invalid_argument("KV cache: sequence " + std::to_string(seq) + " is outside the batch of " +
                                    std::to_string(max_batch_));
  }
  if (positions > layout_.max_seq) {
    return Status::invalid_argument("sequence " + std::to_string(seq) + " needs " + std::to_string(positions) +
                                    " positions; the KV cache holds " + std::to_string(layout_.max_seq));
  }
  return Status::ok();
}

StatusOr<StaticKvCache*> as_static(KvCache& cache, const char* who) {
  if (cache.kind() != KvCache::Kind::kStatic) {
    return Status::unsupported(std::string(who) + " reads only a static KV cache");
  }
  return static_cast<StaticKvCache*>(&cache);
}

}  // namespace tunableop::llm
