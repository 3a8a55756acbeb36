#include "llm/text/generation_loop.h"

#include <algorithm>
#include <chrono>

namespace tunableop::llm {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

int64_t StoppedGeneration::new_tokens() const {
  int64_t n = 0;
  for (const auto& s : sequences) n += int64_t(s.tokens.size());
  return n;
}

StatusOr<int64_t> max_new_tokens_that_fit(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts) {
  if (prompts.empty()) return Status::invalid_argument("no prompts");
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  const int64_t max_seq = engine.options().max_seq;
  const int64_t padded = round_up(longest, engine.options().pad_multiple);
  if (padded > max_seq) {
    return Status::invalid_argument("the prompt (" + std::to_string(longest) + " tokens, padded to " +
                                    std::to_string(padded) + ") does not fit the KV cache of " +
                                    std::to_string(max_seq) + " positions (--max-seq)");
  }
  // The last new token is never fed back, so n new tokens need longest + n - 1 positions.
  return max_seq - longest + 1;
}

StatusOr<StoppedGeneration> generate_until_stop(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                const StopOptions& o, TokenSelector& selector,
                                                const TokenCallback& on_token) {
  if (o.max_new_tokens < 1) return Status::invalid_argument("max_new_tokens must be >= 1");
  auto fit = max_new_tokens_that_fit(engine, prompts);
  if (!fit.is_ok()) return fit.status();
  if (o.max_new_tokens > *fit) {
    return Status::invalid_argument(std::to_string(o.max_new_tokens) + " new tokens do not fit the KV cache of " +
                                    std::to_string(engine.options().max_seq) +
                                    " positions after this prompt (at most " + std::to_string(*fit) + ")");
  }
  const size_t batch = prompts.size();
  StoppedGeneration g;
  g.sequences.resize(batch);
  std::vector<int32_t> greedy, next;
  std::vector<bool> running(batch, true);
  size_t left = batch;

  // Records the step's choices; true when every sequence has stopped.
  auto take = [&](int64_t produced) -> StatusOr<bool> {
    for (size_t b = 0; b < batch; ++b) {
      if (!running[b]) continue;
      g.sequences[b].tokens.push_back(next[b]);
      if (on_token) TUNABLEOP_RETURN_IF_ERROR(on_token(b, next[b]));
      const bool eos = !o.ignore_eos && std::find(o.eos_ids.begin(), o.eos_ids.end(), next[b]) != o.eos_ids.end();
      if (eos || produced == o.max_new_tokens) {
        g.sequences[b].stopped_at_eos = eos;
        running[b] = false;
        --left;
      }
    }
    return left == 0;
  };

  const auto t0 = Clock::now();
  TUNABLEOP_RETURN_IF_ERROR(engine.prefill(prompts, &greedy));
  TUNABLEOP_RETURN_IF_ERROR(selector.select(engine, greedy, &next));
  g.ttft_s = seconds_since(t0);
  auto done = take(1);
  if (!done.is_ok()) return done.status();
  for (int64_t produced = 2; !*done; ++produced) {
    // A stopped sequence still occupies its batch slot: it is fed its last token and its
    // output is dropped (the batch's shapes, and so its GEMM problems, stay the same).
    TUNABLEOP_RETURN_IF_ERROR(engine.decode(next, &greedy));
    ++g.steps;
    std::vector<int32_t> fed = next;
    TUNABLEOP_RETURN_IF_ERROR(selector.select(engine, greedy, &next));
    for (size_t b = 0; b < batch; ++b) {
      if (!running[b]) next[b] = fed[b];
    }
    done = take(produced);
    if (!done.is_ok()) return done.status();
  }
  g.total_s = seconds_since(t0);
  return g;
}

}  // namespace tunableop::llm
