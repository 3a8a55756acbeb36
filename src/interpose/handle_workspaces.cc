#include "interpose/handle_workspaces.h"

#include <atomic>
#include <cstdint>

namespace tunableop::interpose::preload::handle_workspaces {

namespace {

constexpr size_t kSlots = 1024;  // power of two
constexpr uintptr_t kEmpty = 0, kTombstone = 1;

// A handle is used by one thread at a time (cuBLAS requires it), so the value of one slot has
// one writer; the key is claimed with a compare-exchange.
struct Slot {
  std::atomic<uintptr_t> key{kEmpty};
  std::atomic<void*> ptr{nullptr};
  std::atomic<size_t> bytes{0};
};
Slot g_slots[kSlots];

size_t home(uintptr_t key) { return size_t((key >> 4) * 0x9E3779B97F4A7C15ull >> 54) & (kSlots - 1); }

Slot* find(uintptr_t key) {
  for (size_t i = 0, s = home(key); i < kSlots; ++i, s = (s + 1) & (kSlots - 1)) {
    uintptr_t k = g_slots[s].key.load(std::memory_order_acquire);
    if (k == key) return &g_slots[s];
    if (k == kEmpty) return nullptr;
  }
  return nullptr;
}

Slot* find_or_claim(uintptr_t key) {
  if (Slot* s = find(key)) return s;
  for (size_t i = 0, s = home(key); i < kSlots; ++i, s = (s + 1) & (kSlots - 1)) {
    uintptr_t k = g_slots[s].key.load(std::memory_order_acquire);
    if (k == kEmpty || k == kTombstone) {
      if (g_slots[s].key.compare_exchange_strong(k, key, std::memory_order_acq_rel)) return &g_slots[s];
    }
    if (k == key) return &g_slots[s];
  }
  return nullptr;  // full: the workspace stays unknown for this handle
}

}  // namespace

void set(const void* handle, void* ptr, size_t bytes) {
  if (handle == nullptr) return;
  Slot* s = find_or_claim(reinterpret_cast<uintptr_t>(handle));
  if (s == nullptr) return;
  s->ptr.store(ptr, std::memory_order_relaxed);
  s->bytes.store(ptr ? bytes : 0, std::memory_order_release);
}

void reset(const void* handle) {
  if (Slot* s = find(reinterpret_cast<uintptr_t>(handle))) s->bytes.store(0, std::memory_order_release);
}

void forget(const void* handle) {
  if (Slot* s = find(reinterpret_cast<uintptr_t>(handle))) {
    s->bytes.store(0, std::memory_order_relaxed);
    s->ptr.store(nullptr, std::memory_order_relaxed);
    s->key.store(kTombstone, std::memory_order_release);
  }
}

bool get(const void* handle, void** ptr, size_t* bytes) {
  *ptr = nullptr;
  *bytes = 0;
  Slot* s = find(reinterpret_cast<uintptr_t>(handle));
  if (s == nullptr) return false;
  size_t b = s->bytes.load(std::memory_order_acquire);
  if (b == 0) return false;
  *ptr = s->ptr.load(std::memory_order_relaxed);
  *bytes = b;
  return true;
}

void clear_all() {
  for (auto& s : g_slots) {
    s.key.store(kEmpty);
    s.ptr.store(nullptr);
    s.bytes.store(0);
  }
}

}  // namespace tunableop::interpose::preload::handle_workspaces
