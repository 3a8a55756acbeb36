// A problem's identity as a few integers, hashed: what the hot path looks plans up by, instead
// of the signature strings (those are built only when a plan revalidates).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>

namespace tunableop::ops {

struct ProblemKey {
  static constexpr size_t kCapacity = 24;  // GEMM uses 15; room for attention's shape
  std::array<int64_t, kCapacity> v{};
  uint32_t n = 0;

  ProblemKey() = default;
  ProblemKey(std::initializer_list<int64_t> values) {
    for (int64_t x : values) add(x);
  }
  ProblemKey& add(int64_t x) {
    if (n < kCapacity) v[n] = x;
    ++n;  // an overfull key never equals a valid one (n differs), and make_key refuses it
    return *this;
  }
  bool valid() const { return n <= kCapacity; }
  bool operator==(const ProblemKey& o) const {
    return n == o.n && std::equal(v.begin(), v.begin() + std::min<uint32_t>(n, kCapacity), o.v.begin());
  }
  // One multiply and shift per value, then splitmix64's finalizer once: well mixed for small
  // integers (the slot table uses the low bits), and a third of the cost of finalizing every
  // value (it is on every plain call and every interposed call).
  uint64_t hash() const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < std::min<uint32_t>(n, kCapacity); ++i) {
      h = (h ^ uint64_t(v[i])) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
  }
};

}  // namespace tunableop::ops
