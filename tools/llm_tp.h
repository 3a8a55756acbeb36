// `tunableop llm --tp N`: the tensor-parallel engine for the command (llm/parallel/tp_engine.h).
#pragma once

#include <memory>
#include <vector>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "tunableop/context.h"

namespace tunableop::cli {

// N ranks: on the GPUs ctx's ordinal .. + N - 1 (rank 0 on ctx, the others on contexts made
// with ctx's settings, owned by the engine), or N CPU ranks sharing ctx. `weights`: the CPU's.
StatusOr<std::unique_ptr<llm::Engine>> make_cli_tp_engine(int tp, const llm::ModelSpec& spec, uint64_t seed,
                                                          int64_t layers, const llm::EngineOptions& options,
                                                          Context& ctx,
                                                          std::shared_ptr<const llm::ModelWeights> weights);

// `engine` with the contexts of ranks 1.. that it runs on, which die after it; every call goes
// to `engine` (tests/tools/llm_tp_test.cc checks that none is left to Engine's defaults).
std::unique_ptr<llm::Engine> keep_rank_contexts(std::vector<std::unique_ptr<Context>> ranks,
                                                std::unique_ptr<llm::Engine> engine);

// Turns TunableOp on (tuned) or off on ctx and on every rank context of `engine` (--compare).
void set_tunableop_mode(llm::Engine& engine, Context& ctx, bool tuned);

}  // namespace tunableop::cli
