// A hash table read without locks: the dispatch hot path finds a problem's slot with one atomic
// load of the table and a short probe. Writers (a new problem) take a mutex, insert with a
// release store, and grow by publishing a new table. Slots and retired tables stay alive until
// the table dies, so a reader never follows a dangling pointer; problems are never removed (a
// process sees a bounded set of them).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/framework/problem_key.h"

namespace tunableop::ops {

// Slot: constructible from (key, hash) and exposing `key` and `hash` members.
template <class Slot>
class SlotTable {
 public:
  SlotTable() { publish(std::make_unique<Table>(16)); }
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  // nullptr when absent. Lock-free.
  Slot* find(const ProblemKey& key, uint64_t hash) const {
    const Table* t = current_.load(std::memory_order_acquire);
    for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
      Slot* s = t->cells[i].load(std::memory_order_acquire);
      if (!s) return nullptr;
      if (s->hash == hash && s->key == key) return s;
    }
  }

  // The slot for key, made with make(key, hash) on first sight.
  template <class Make>
  Slot& find_or_insert(const ProblemKey& key, uint64_t hash, Make&& make) {
    if (Slot* s = find(key, hash)) return *s;
    std::lock_guard<std::mutex> lock(mu_);
    if (Slot* s = find(key, hash)) return *s;
    Table* t = current_.load(std::memory_order_relaxed);
    if ((count_ + 1) * 2 > t->cells_size) {  // keep the load factor under 1/2: probes stay short
      auto bigger = std::make_unique<Table>(t->cells_size * 2);
      for (const auto& s : slots_) place(*bigger, s.get());
      t = bigger.get();
      publish(std::move(bigger));
    }
    slots_.push_back(make(key, hash));
    Slot* s = slots_.back().get();
    place(*t, s);
    ++count_;
    return *s;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  struct Table {
    explicit Table(size_t n) : cells_size(n), mask(n - 1), cells(new std::atomic<Slot*>[n]) {
      for (size_t i = 0; i < n; ++i) cells[i].store(nullptr, std::memory_order_relaxed);
    }
    size_t cells_size, mask;
    std::unique_ptr<std::atomic<Slot*>[]> cells;
  };
  static void place(Table& t, Slot* s) {
    size_t i = s->hash & t.mask;
    while (t.cells[i].load(std::memory_order_relaxed)) i = (i + 1) & t.mask;
    t.cells[i].store(s, std::memory_order_release);
  }
  void publish(std::unique_ptr<Table> t) {
    current_.store(t.get(), std::memory_order_release);
    tables_.push_back(std::move(t));  // retired tables stay readable
  }

  mutable std::mutex mu_;
  std::atomic<Table*> current_{nullptr};
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t count_ = 0;
};

}  // namespace tunableop::ops
