// GemmAndBias dispatch internals (as ops/gemm/dispatch.h for GEMM).
#pragma once

#include <vector>

#include "tunableop/gemm_and_bias.h"

namespace tunableop {

// The candidates for p on the context's device at the given effort, Default first (static
// candidates in registration order, then family expansions).
std::vector<GemmAndBiasCandidate> gemm_and_bias_candidates_for(Context& ctx, const GemmAndBiasParams& p,
                                                               int search_effort);

// A candidate by its stored name (static or rebuilt by a family); NotFound if none.
StatusOr<GemmAndBiasCandidate> find_gemm_and_bias_candidate(Context& ctx, const GemmAndBiasParams& p,
                                                            const std::string& name);

}  // namespace tunableop
