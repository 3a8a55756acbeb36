// Prefill attention as two strided-batched GEMMs, the formulation both devices use today (and
// the "Default" math path a tunable Attention op would keep as its reference).
#pragma once

#include <cstdint>

#include "llm/config.h"
#include "tunableop/gemm.h"

namespace tunableop::llm {

// One batch entry per (sequence, kv head), the group of query heads sharing that kv head
// stacked into M = tokens * group rows:
//   scores [M x tokens] = scale * q_perm [M x hd] * K [tokens x hd]^T   (column-major S^T = K q^T)
//   out    [M x hd]     = P [M x tokens] * V [tokens x hd]               (column-major O^T = V^T P^T)
// K and V are read in place from a static cache ([seq][kv_head][max_seq][hd]); q_perm, scores
// and out are dense. A causal softmax turns scores into P in between.
struct AttentionGemms {
  GemmParams scores, output;
};
AttentionGemms prefill_attention_gemms(const ModelConfig& c, DType dtype, int64_t seqs, int64_t tokens,
                                       int64_t max_seq);

}  // namespace tunableop::llm
