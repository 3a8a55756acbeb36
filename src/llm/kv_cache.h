// The KV cache as an object of its own: the forward pass hands it to the device's rope_kv
// (which writes it) and attention (which reads it) and never looks inside, so a paged cache
// can replace the static one without touching the model.
#pragma once

#include <cstdint>
#include <string>

#include "llm/buffer.h"
#include "tunableop/status.h"

namespace tunableop::llm {

class KvCache {
 public:
  enum class Kind { kStatic };
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

// The static cache behind `cache`, or an Unsupported naming `who` (a device kernel that reads
// only static caches).
StatusOr<StaticKvCache*> as_static(KvCache& cache, const char* who);

}  // namespace tunableop::llm
