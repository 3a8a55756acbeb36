// A row's sampling parameters and the random draw, shared by the host (llm/sampling.h) and the
// GPU (llm/cuda/sampling.cu): C++17, callable from device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TUNABLEOP_HD __host__ __device__
#else
#define TUNABLEOP_HD
#endif

namespace tunableop::llm {

struct SamplingRow {
  float temperature = 0;  // 0: greedy
  int32_t top_k = 0;      // 0: every token
  float top_p = 1;        // (0, 1]
  uint32_t pad_ = 0;
  uint64_t seed = 0;
  uint64_t counter = 0;  // the draw's index in its sequence (its generated-token index)
  TUNABLEOP_HD bool greedy() const { return temperature <= 0; }
};
static_assert(sizeof(SamplingRow) == 32, "SamplingRow is copied to the device as is");

// Rounds of the top-p bisection (each halves the threshold's interval; 24 reaches float's
// resolution on (0, 1]).
constexpr int kTopPRounds = 24;

// splitmix64's finalizer: the mixing both sides use.
TUNABLEOP_HD constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// A uniform double in [0, 1) from (seed, counter): 53 bits of a mix of both.
TUNABLEOP_HD constexpr double uniform01(uint64_t seed, uint64_t counter) {
  const uint64_t bits = mix64(seed + 0x9E3779B97F4A7C15ull * (counter + 1));
  return double(bits >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace tunableop::llm
