// GEMM dispatch internals shared by the public gemm() and the CLI (offline tuning, benches).
#pragma once

#include <memory>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop {

// The candidates for p on the context's device at the given effort, Default first (static
// candidates in registration order, then family expansions).
std::vector<GemmCandidate> gemm_candidates_for(Context& ctx, const GemmParams& p, int search_effort);

// A candidate by its stored name (static or rebuilt by a family); NotFound if none.
StatusOr<GemmCandidate> find_gemm_candidate(Context& ctx, const GemmParams& p, const std::string& name);

// Random operands on the context's device, freed on destruction (offline tuning, benches).
class GemmBuffers {
 public:
  static StatusOr<std::unique_ptr<GemmBuffers>> random(Context& ctx, const GemmParams& p, uint64_t seed = 1,
                                                       void* stream = nullptr);
  ~GemmBuffers();
  GemmOperands operands() const { return {a_, b_, c_, stream_}; }
  const GemmParams& params() const { return p_; }

 private:
  GemmBuffers() = default;
  const DeviceRuntime* rt_ = nullptr;
  GemmParams p_;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *stream_ = nullptr;
};

// Tunes p now on random data (regardless of kEnabled/kTuning) and stores the result.
StatusOr<TuningReport> tune_gemm(Context& ctx, const GemmParams& p, bool retune = false, void* stream = nullptr);

}  // namespace tunableop
