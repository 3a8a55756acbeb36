// Our flash-attention kernels as candidates: `Attn_Flash_q<rows>_k<keys>_w<warps>_s<stages>`
// (one pass over the keys) and `Attn_SplitKv_q<rows>_k<keys>_w<warps>_s<stages>_sp<splits>`
// (flash-decoding: the keys split over `splits` blocks, then a combine kernel).
#pragma once

#include <vector>

#include "backends/cuda/attention/flash_launch.h"
#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// Every configuration for every head dim, unsplit first, then the split-KV variants.
std::vector<AttentionCandidate> flash_attention_candidates();

// The kernels' arguments for a problem (params with_defaults applied) and its operands, with
// the keys split over `splits` blocks; workspace left null. Shared with decode_candidates.cc.
FlashArgs flash_args(const AttentionParams& p, const AttentionOperands& o, int splits);

}  // namespace tunableop::cuda
