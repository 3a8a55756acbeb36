// Generation that stops: one batch of prompts through prefill and decode steps, the next token
// of each sequence chosen by a TokenSelector (greedy or sampled), each sequence ending at an EOS
// id (unless ignore_eos) or after max_new_tokens. Every new token is handed to a callback as
// soon as its step returns, for streaming.
//
// The benchmark path (generate.h: run_benchmark, exactly max_new_tokens, greedy) is separate and
// unchanged: fixed lengths are what the seed's measurement needs.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "llm/engine.h"
#include "llm/text/sampler.h"

namespace tunableop::llm {

struct StopOptions {
  int64_t max_new_tokens = 256;
  std::vector<int32_t> eos_ids;  // any of them ends its sequence (the EOS itself is kept)
  bool ignore_eos = false;       // generate max_new_tokens regardless
};

struct StoppedSequence {
  std::vector<int32_t> tokens;  // new tokens, the stopping EOS included (as transformers does)
  bool stopped_at_eos = false;
};

struct StoppedGeneration {
  std::vector<StoppedSequence> sequences;
  double ttft_s = 0;   // prefill up to the first tokens chosen
  double total_s = 0;  // everything, callbacks included
  int64_t steps = 0;   // decode steps run
  int64_t new_tokens() const;
};

// Called once per new token of a sequence still running, in sequence order within a step. A
// non-ok Status stops the generation and is returned.
using TokenCallback = std::function<Status(size_t sequence, int32_t token)>;

// The largest max_new_tokens that fits the engine's KV cache after these prompts (decode
// writes each sequence's cache at its real length), or an error when even the prompts do not fit.
StatusOr<int64_t> max_new_tokens_that_fit(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts);

StatusOr<StoppedGeneration> generate_until_stop(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                const StopOptions& options, TokenSelector& selector,
                                                const TokenCallback& on_token = {});

}  // namespace tunableop::llm
