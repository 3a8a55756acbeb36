#include "llm/kv_cache.h"

#include <algorithm>

namespace tunableop::llm {

Status KvCacheOptions::validate() const {
  if (kind == KvCacheKind::kPaged) {
    if (page_size < 1 || page_size > 4096) {
      return Status::invalid_argument("KV cache page size " + std::to_string(page_size) + " must be in 1..4096");
    }
    if (pages < 0) return Status::invalid_argument("KV cache pages must be >= 0 (0: enough for every sequence)");
  }
  return Status::ok();
}

const char* kv_cache_kind_name(KvCacheKind kind) { return kind == KvCacheKind::kPaged ? "paged" : "static"; }

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

KvCacheStats StaticKvCache::stats() const {
  KvCacheStats s;
  s.kind = KvCacheKind::kStatic;
  s.allocated = s.in_use = s.peak_in_use = bytes();
  const int64_t positions = max_batch_ * layout_.max_seq;
  s.bytes_per_position = positions > 0 ? bytes() / positions : 0;
  s.static_bytes = bytes();
  return s;
}

size_t PagedKvCache::pool_bytes(const Geometry& g) {
  return size_t(g.layers * g.pages * g.page_elems()) * g.elem_bytes;
}

PagedKvCache::PagedKvCache(Geometry g, Buffer k, Buffer v, Buffer table, Buffer table_host, Upload upload)
    : g_(g),
      k_(std::move(k)),
      v_(std::move(v)),
      table_(std::move(table)),
      table_host_(std::move(table_host)),
      upload_(std::move(upload)),
      held_(size_t(g.max_batch), 0) {
  // Page 0 is handed out first; later, freed pages come back in whatever order sequences end.
  free_.resize(size_t(g_.pages));
  for (int64_t i = 0; i < g_.pages; ++i) free_[size_t(i)] = int32_t(g_.pages - 1 - i);
  std::fill_n(table_host_.as<int32_t>(), g_.max_batch * g_.pages_per_seq(), -1);
}

Status PagedKvCache::reserve(int64_t seq, int64_t positions) {
  if (seq < 0 || seq >= g_.max_batch) {
    return Status::invalid_argument("KV cache: sequence " + std::to_string(seq) + " is outside the batch of " +
                                    std::to_string(g_.max_batch));
  }
  if (positions > g_.max_seq) {
    return Status::invalid_argument("sequence " + std::to_string(seq) + " needs " + std::to_string(positions) +
                                    " positions; the KV cache holds " + std::to_string(g_.max_seq));
  }
  const size_t need = size_t((positions + g_.page_size - 1) / g_.page_size);
  size_t& held = held_[size_t(seq)];
  if (need <= held) return Status::ok();
  if (need - held > free_.size()) {
    return Status::invalid_argument("KV cache out of pages: sequence " + std::to_string(seq) + " needs " +
                                    std::to_string(need - held) + " more page(s) of " + std::to_string(g_.page_size) +
                                    " positions, " + std::to_string(free_.size()) + " of " + std::to_string(g_.pages) +
                                    " are free (a larger pool: --kv-pages)");
  }
  int32_t* row = table_host_.as<int32_t>() + seq * g_.pages_per_seq();
  const size_t first = held;
  for (; held < need; ++held) {
    row[held] = free_.back();
    free_.pop_back();
  }
  peak_pages_ = std::max(peak_pages_, g_.pages - int64_t(free_.size()));
  // Only the new entries travel; the kernels read entries below a sequence's length only.
  return upload_(table_.as<int32_t>() + seq * g_.pages_per_seq() + first, row + first,
                 (need - first) * sizeof(int32_t));
}

int32_t PagedKvCache::scratch_page() {
  if (scratch_ < 0 && !free_.empty()) {
    scratch_ = free_.back();
    free_.pop_back();
  }
  return scratch_;
}

void PagedKvCache::release(int64_t seq) {
  if (seq < 0 || seq >= g_.max_batch) return;
  int32_t* row = table_host_.as<int32_t>() + seq * g_.pages_per_seq();
  size_t& held = held_[size_t(seq)];
  while (held > 0) {
    --held;
    free_.push_back(row[held]);
    row[held] = -1;
  }
}

KvCacheStats PagedKvCache::stats() const {
  KvCacheStats s;
  s.kind = KvCacheKind::kPaged;
  s.page_size = g_.page_size;
  s.pages = g_.pages;
  s.free_pages = int64_t(free_.size());
  s.allocated = bytes();
  s.in_use = (g_.pages - int64_t(free_.size())) * page_bytes_all_layers();
  s.peak_in_use = peak_pages_ * page_bytes_all_layers();
  s.bytes_per_position = page_bytes_all_layers() / g_.page_size;
  s.static_bytes = g_.max_batch * g_.max_seq * s.bytes_per_position;
  return s;
}

StatusOr<StaticKvCache*> as_static(KvCache& cache, const char* who) {
  if (cache.kind() != KvCache::Kind::kStatic) {
    return Status::unsupported(std::string(who) + " reads only a static KV cache");
  }
  return static_cast<StaticKvCache*>(&cache);
}

}  // namespace tunableop::llm
