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
  // splitmix64 over the values: cheap and well mixed for small integers.
  uint64_t hash() const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < std::min<uint32_t>(n, kCapacity); ++i) {
      uint64_t z = h + uint64_t(v[i]) + 0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      h = z ^ (z >> 31);
    }
    return h;
  }
};

}  // namespace tunableop::ops
