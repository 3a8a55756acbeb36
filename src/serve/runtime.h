// The engine runtime of the server: one thread that owns the engine and runs the continuous
// batch (serve/scheduler.h decides each step), fed by submit() from any thread. See
// docs/serve.md for the scheduler and the tuning policy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "serve/request.h"
#include "tunableop/context.h"

namespace tunableop::serve {

struct RuntimeOptions {
  int64_t max_running = 0;        // sequences decoded together at most (0: the engine's max_batch)
  int64_t max_waiting = 1024;     // queued requests beyond which submit() answers kResourceExhausted
  int64_t prefill_tokens = 2048;  // prompt tokens per prefill pass (the chunked prefill's budget)
  bool tune = true;               // tune the batch buckets' problems before ready, new ones when idle
  std::vector<int32_t> eos_ids;   // the model's EOS ids (a request with ignore_eos does not stop at them)
  uint64_t seed = 0;              // seeds the requests that give none
  // Progress of the start-up (warm-up and tuning), one line at a time; may be empty.
  std::function<void(const std::string&)> progress;
};

// Takes the engine (built with a paged KV cache and max_batch >= max_running) and the context
// its GEMMs and attention go through; warms up (and tunes, with o.tune) before it returns.
StatusOr<std::unique_ptr<Backend>> make_runtime(std::unique_ptr<llm::Engine> engine, Context& ctx, RuntimeOptions o);

}  // namespace tunableop::serve
