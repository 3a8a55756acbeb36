// The rotary-embedding angles, computed once on the host in fp32 the way transformers does;
// devices use the table as it is (CPU) or copy it to device memory (CUDA).
#pragma once

#include <cstdint>
#include <vector>

namespace tunableop::llm {

// cos/sin of pos * inv_freq[i], inv_freq[i] = 1 / theta^(2i / head_dim), for pos < max_pos,
// i < head_dim / 2; laid out [pos][i].
struct RopeTable {
  int64_t half = 0;
  std::vector<float> cos, sin;
};
RopeTable make_rope_table(int64_t head_dim, double theta, int64_t max_pos);

}  // namespace tunableop::llm
