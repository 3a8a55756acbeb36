// Our flash-attention kernels as candidates: `Attn_Flash_q<rows>_k<keys>_w<warps>_s<stages>`
// (one pass over the keys) and `Attn_SplitKv_q<rows>_k<keys>_w<warps>_s<stages>_sp<splits>`
// (flash-decoding: the keys split over `splits` blocks, then a combine kernel).
#pragma once

#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// Every configuration for every head dim, unsplit first, then the split-KV variants.
std::vector<AttentionCandidate> flash_attention_candidates();

}  // namespace tunableop::cuda
