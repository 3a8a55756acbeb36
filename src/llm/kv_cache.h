// The KV cache as an object of its own: the forward pass hands it to the device's rope_kv
// (which writes it) and attention (which reads it) and never looks inside. Two kinds: static
// (one max_seq block per sequence, allocated up front) and paged (pages from a pool, handed
// out as sequences grow).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/buffer.h"
#include "tunableop/status.h"

namespace tunableop::llm {

enum class KvCacheKind { kStatic, kPaged };

// How the engine's KV cache is laid out (EngineOptions::kv_cache; `--kv-cache`, `--page-size`,
// `--kv-pages` on the command line).
struct KvCacheOptions {
  KvCacheKind kind = KvCacheKind::kStatic;
  int64_t page_size = 64;  // paged: positions per page
  int64_t pages = 0;       // paged: pages in the pool; 0 -> max_batch full-length sequences
  // Paged, pages == 0 only: at most the pages the device's free memory holds less this many
  // bytes (what a server sets: the pool fills the GPU beside the weights and the passes'
  // buffers, as vLLM's gpu_memory_utilization does); 0: no limit.
  int64_t fill_free_memory_less = 0;
  Status validate() const;
};

// What a cache holds and what its sequences use, in bytes of device memory (K and V, all layers).
struct KvCacheStats {
  KvCacheKind kind = KvCacheKind::kStatic;
  int64_t page_size = 0, pages = 0;  // paged only
  int64_t free_pages = 0;            // paged only: pages no sequence holds
  int64_t allocated = 0;             // device memory held
  int64_t in_use = 0;                // positions reserved by live sequences (static: all of it)
  int64_t peak_in_use = 0;           // the most in_use has been
  int64_t bytes_per_position = 0;    // one position of one sequence, K and V of every layer
  int64_t static_bytes = 0;          // what a static cache of max_batch x max_seq positions holds
};

class KvCache {
 public:
  using Kind = KvCacheKind;
  virtual ~KvCache() = default;
  virtual Kind kind() const = 0;
  virtual int64_t max_batch() const = 0;
  // Positions one sequence can hold at most.
  virtual int64_t max_seq() const = 0;
  // Makes room for positions [0, positions) of sequence `seq` before a pass writes them; an
  // error names what does not fit. (A paged cache allocates pages here.)
  virtual Status reserve(int64_t seq, int64_t positions) = 0;
  // Sequence `seq` ended: its positions may be reused. (A paged cache frees its pages.)
  virtual void release(int64_t seq) = 0;
  // Device memory the cache holds.
  virtual int64_t bytes() const = 0;
  virtual KvCacheStats stats() const = 0;
};

// Where (sequence, kv head, position) lives in a static cache layer:
// [max_batch][kv_head][max_seq][head_dim], in elements.
struct KvLayout {
  int64_t n_kv_heads = 0, head_dim = 0, max_seq = 0;
  int64_t offset(int64_t seq, int64_t head, int64_t pos) const {
    return ((seq * n_kv_heads + head) * max_seq + pos) * head_dim;
  }
};

// Allocated once for max_batch sequences of max_seq positions, every layer alike: layer l's K
// (V) starts at k(l) (v(l)). Elements are the device's element type.
class StaticKvCache final : public KvCache {
 public:
  // `k` and `v` hold bytes_needed(...) each.
  StaticKvCache(KvLayout layout, int64_t max_batch, size_t elem_bytes, Buffer k, Buffer v);
  static size_t bytes_needed(const KvLayout& layout, int64_t max_batch, int64_t layers, size_t elem_bytes);

  Kind kind() const override { return Kind::kStatic; }
  int64_t max_batch() const override { return max_batch_; }
  int64_t max_seq() const override { return layout_.max_seq; }
  Status reserve(int64_t seq, int64_t positions) override;
  void release(int64_t) override {}
  int64_t bytes() const override { return int64_t(k_.bytes() + v_.bytes()); }
  KvCacheStats stats() const override;

  const KvLayout& layout() const { return layout_; }
  void* k(int64_t layer) const { return static_cast<char*>(k_.get()) + layer * layer_bytes(); }
  void* v(int64_t layer) const { return static_cast<char*>(v_.get()) + layer * layer_bytes(); }

 private:
  int64_t layer_bytes() const {
    return max_batch_ * layout_.n_kv_heads * layout_.max_seq * layout_.head_dim * int64_t(elem_bytes_);
  }
  KvLayout layout_;
  int64_t max_batch_;
  size_t elem_bytes_;
  Buffer k_, v_;
};

// Fixed-size pages from one pool, handed to sequences as they grow and taken back when they end
// (vLLM's paged attention). Layer l's K pool (V alike) is k(l): [pages][n_kv_heads][page_size]
// [head_dim]; position j of sequence s lives in page block_table[s][j / page_size] at slot
// j % page_size. The table is kept on the host and copied to the device row by row when a
// sequence gets a page (through the device's upload, ordered before the next pass), so the
// kernels, and a captured decode graph, read it there.
class PagedKvCache final : public KvCache {
 public:
  struct Geometry {
    int64_t n_kv_heads = 0, head_dim = 0, page_size = 0, pages = 0, layers = 0, max_batch = 0, max_seq = 0;
    size_t elem_bytes = 0;
    int64_t pages_per_seq() const { return (max_seq + page_size - 1) / page_size; }
    int64_t page_elems() const { return n_kv_heads * page_size * head_dim; }
  };
  using Upload = std::function<Status(void* dst, const void* src, size_t bytes)>;
  // Bytes of each of the K and V pools (every layer).
  static size_t pool_bytes(const Geometry& g);
  // `k`, `v`: pool_bytes(g) each; `table`: device memory and `table_host` host memory (pinned
  // on CUDA) of max_batch * pages_per_seq int32 each.
  PagedKvCache(Geometry g, Buffer k, Buffer v, Buffer table, Buffer table_host, Upload upload);

  Kind kind() const override { return Kind::kPaged; }
  int64_t max_batch() const override { return g_.max_batch; }
  int64_t max_seq() const override { return g_.max_seq; }
  Status reserve(int64_t seq, int64_t positions) override;
  void release(int64_t seq) override;
  int64_t bytes() const override { return int64_t(k_.bytes() + v_.bytes()); }
  KvCacheStats stats() const override;

  const Geometry& geometry() const { return g_; }
  void* k(int64_t layer) const { return static_cast<char*>(k_.get()) + layer * layer_bytes(); }
  void* v(int64_t layer) const { return static_cast<char*>(v_.get()) + layer * layer_bytes(); }
  const int32_t* block_table() const { return table_.as<const int32_t>(); }  // device, [max_batch][pages_per_seq]
  int64_t pages_held(int64_t seq) const { return int64_t(held_[size_t(seq)]); }
  int64_t free_pages() const { return int64_t(free_.size()); }
  // Sequence seq's row of the block table (host memory): its pages, in position order.
  const int32_t* host_row(int64_t seq) const { return table_host_.as<const int32_t>() + seq * g_.pages_per_seq(); }
  // A page no sequence will own, taken from the pool on the first call (the same one after):
  // where a slot pass's padding rows point (model_slots.h).
  int32_t scratch_page();

 private:
  int64_t layer_bytes() const { return g_.pages * g_.page_elems() * int64_t(g_.elem_bytes); }
  int64_t page_bytes_all_layers() const { return 2 * g_.layers * g_.page_elems() * int64_t(g_.elem_bytes); }
  Geometry g_;
  Buffer k_, v_, table_, table_host_;
  Upload upload_;
  std::vector<int32_t> free_;  // free pages, the next one handed out at the back
  std::vector<size_t> held_;   // pages each sequence holds (its table row's first entries)
  int64_t peak_pages_ = 0;
  int32_t scratch_ = -1;
};

// The static cache behind `cache`, or an Unsupported naming `who` (a device kernel that reads
// only static caches).
StatusOr<StaticKvCache*> as_static(KvCache& cache, const char* who);

// "static" or "paged".
const char* kv_cache_kind_name(KvCacheKind kind);

}  // namespace tunableop::llm
