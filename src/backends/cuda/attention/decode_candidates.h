// The one-launch decode attention kernel (decode_kernel.cuh) as candidates:
// `Attn_DecodeOneLaunch_w<warps>_sp<splits>`: `splits` blocks per (sequence, kv head) share its
// keys, each holding every query row of that kv head; with splits > 1 the last block to finish
// combines the partials in the same launch. For decode against short caches with few query
// rows per kv head (GQA/MQA): q_len * heads / kv_heads up to 32 (d64), 16 (d128), 8 (d256).
#pragma once

#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

std::vector<AttentionCandidate> decode_attention_candidates();

}  // namespace tunableop::cuda
