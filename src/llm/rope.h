// The rotary-embedding angles, computed once on the host in fp32 the way transformers does
// (modeling_rope_utils: the inverse frequencies of each rope_type, then cos and sin of
// position x frequency times the type's attention factor); devices use the table as it is
// (CPU) or copy it to device memory (CUDA).
#pragma once

#include <cstdint>
#include <vector>

#include "llm/config.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// cos/sin of pos * inv_freq[i] (times the attention factor), for pos < max_pos, i < head_dim / 2;
// laid out [pos][i].
struct RopeTable {
  int64_t half = 0;
  std::vector<float> cos, sin;
};
// Plain RoPE: inv_freq[i] = 1 / theta^(2i / head_dim).
RopeTable make_rope_table(int64_t head_dim, double theta, int64_t max_pos);
// The model's RoPE, scaled as c.rope says.
RopeTable make_rope_table(const ModelConfig& c, int64_t max_pos);

// The model's inverse frequencies (head_dim / 2 of them) and the factor cos and sin are
// multiplied by (yarn's attention factor; 1 otherwise), in transformers' fp32 arithmetic.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_factor = 1.f;
};
RopeFrequencies rope_frequencies(const ModelConfig& c);

// Ok when the engine may run `max_seq` positions with this RoPE: dynamic NTK scaling changes
// its base with the sequence length past max_position_embeddings (a per-step state we do not
// model), so it is refused beyond that, naming `source`.
Status check_rope_positions(const ModelConfig& c, int64_t max_seq, const std::string& source);

}  // namespace tunableop::llm
