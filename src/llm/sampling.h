// Choosing each sequence's next token where its logits are (the server's sampling; issue 26):
// greedy, or temperature + top-k + top-p with a counter-based random draw, so that one
// algorithm runs on the CPU (here) and on the GPU (cuda/sampling.cu) and the two agree.
//
// For one row of logits l[0..V) and a SamplingRow:
//   temperature 0      -> the first index of the largest logit (torch.argmax).
//   top_k in 1..V-1    -> keep the tokens whose logit is >= the k-th largest logit (ties at the
//                         boundary are all kept).
//   weights            -> w_i = exp((l_i - max) / temperature) for the kept tokens.
//   top_p < 1          -> keep the tokens whose weight is >= tau, tau the largest threshold whose
//                         kept weights hold >= top_p of the (top-k) total: the most likely
//                         tokens until their mass reaches top_p, as transformers keeps them
//                         (ties at the boundary are all kept).
//   draw               -> u = uniform(seed, counter) in [0, 1) times the kept mass; the token is
//                         the first kept one, in vocabulary order, whose running sum of kept
//                         weights exceeds u.
// The threshold tau is found by bisection on [0, 1] (weights are <= 1, the largest is 1) for a
// fixed number of rounds, in float, the same on both sides; sums are in double. The CPU and the
// GPU can still differ where exp() rounds differently (a few ulps) and u lands within that of a
// boundary: the GPU test allows such rare differences and checks every token is in the kept set.
#pragma once

#include <cstdint>
#include <span>

#include "llm/sampling_row.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// The host implementation of the algorithm above. NaN or +inf logits are an error.
StatusOr<int32_t> sample_row(std::span<const float> logits, const SamplingRow& row);

// Checks a row's parameters (the server validates requests with it).
Status validate_sampling_row(const SamplingRow& row, int64_t vocab);

}  // namespace tunableop::llm
