// `tunableop llm`'s bench mode: greedy generation of exactly max_new tokens, timed as the seed's
// Example 2 (tokens/s) plus TTFT, TPOT and latency; --compare runs untuned and tuned interleaved.
#pragma once

#include <string>
#include <vector>

#include "llm/engine.h"
#include "llm/text/tokenizer.h"
#include "llm_args.h"
#include "tunableop/context.h"

namespace tunableop::cli {

// The decode steps --profile-decode profiles follow this many untimed ones: the benchmark's mean
// position (half-way through its new tokens), since the attention kernels' time grows with the
// context and a profile at the prompt would hide it.
int64_t profile_warmup(int64_t max_new);

// `tokenizer`: set when the prompts came as text (the first sequence's continuation is printed).
int run_bench(const LlmArgs& a, llm::Engine& engine, Context& ctx, const std::string& model_desc,
              const llm::Tokenizer* tokenizer, const std::vector<std::vector<int32_t>>& prompts, int64_t padded,
              int64_t max_new);

}  // namespace tunableop::cli
