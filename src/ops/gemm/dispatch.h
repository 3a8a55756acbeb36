// GEMM dispatch internals shared by the public gemm() and the CLI (offline tuning, benches).
#pragma once

#include <memory>
#include <vector>

#include "ops/framework/dispatch.h"
#include "ops/gemm/definition.h"
#include "tunableop/gemm.h"

namespace tunableop {

// The candidates for p on the context's device at the given effort, Default first (static
// candidates in registration order, then family expansions).
std::vector<GemmCandidate> gemm_candidates_for(Context& ctx, const GemmParams& p, int search_effort);

// A candidate by its stored name (static or rebuilt by a family); NotFound if none.
StatusOr<GemmCandidate> find_gemm_candidate(Context& ctx, const GemmParams& p, const std::string& name);

// Random operands on the context's device, freed on destruction (offline tuning, benches).
using GemmBuffers = RandomOperands<GemmOp>;

// Tunes p now on random data (regardless of kEnabled/kTuning) and stores the result.
StatusOr<TuningReport> tune_gemm(Context& ctx, const GemmParams& p, bool retune = false, void* stream = nullptr);

}  // namespace tunableop
