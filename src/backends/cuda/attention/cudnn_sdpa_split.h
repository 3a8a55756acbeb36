// `Attn_Cudnn_SdpaSplit`: a causal prefill without a cached prefix (one sequence, q_len ==
// kv_len >= 512) as three cuDNN SDPA calls side by side and a merge, so that the late query tiles
// stop setting the time.
//
// Why: cuDNN gives each 128-row query tile of each head one thread block, and under the causal
// mask tile i reads i + 1 key blocks. With few heads (Gemma-2B: 8 heads, 2048 tokens = 128
// tiles on 132 SMs) every tile runs at once and the last one, with twice the average work, is
// the whole kernel's time (~300 TFLOP/s of ~780). Split the rows at h (n/2 rounded up to 64):
//   A: rows [0, h)  x keys [0, h)   causal  -> out rows [0, h)              (main stream)
//   C: rows [h, n)  x keys [h, n)   causal  -> out rows [h, n), lse_c       (side stream 1)
//   B: rows [h, n)  x keys [0, h)   full    -> scratch, lse_b               (side stream 0)
// then out rows [h, n) = merge(C, B) by their log-sum-exps. Every tile now reads at most about
// half the keys, and the three grids fill the SMs together. Batch 1 only: the parts address
// their rows by pointer offsets, which one sequence's layout allows.
#pragma once

#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// The candidate (where cuDNN's headers were found at build time; refuses at run time without
// the library like Attn_Cudnn_Sdpa).
std::vector<AttentionCandidate> cudnn_sdpa_split_candidates();

// Where the rows split for a q_len (exposed for the tests).
int64_t cudnn_sdpa_split_row(int64_t q_len);

}  // namespace tunableop::cuda
