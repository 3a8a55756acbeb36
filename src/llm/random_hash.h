// The counter-based generator behind random-weight models, in a header with no dependencies so
// that CUDA kernels (compiled as C++17, without the library's C++20 headers) share it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TUNABLEOP_LLM_HD __host__ __device__
#else
#define TUNABLEOP_LLM_HD
#endif

namespace tunableop::llm {

// Uniform in [-1, 1): a splitmix64 finaliser of (seed, stream, index), top 24 bits. Any
// element can be computed alone, so CPU and GPU fill the same tensor independently.
TUNABLEOP_LLM_HD inline float random_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + index;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

}  // namespace tunableop::llm
