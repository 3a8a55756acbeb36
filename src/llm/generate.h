// Greedy generation and its timing: the seed's Example 2 loop (warm-up runs, then timed runs
// of a fixed number of new tokens) with TTFT and TPOT split out.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/engine.h"

namespace tunableop::llm {

struct Generation {
  std::vector<std::vector<int32_t>> tokens;  // new tokens per sequence (max_new_tokens each)
  double ttft_s = 0;                         // prefill, up to the first new token on the host
  std::vector<double> step_s;                // each decode step
  double total_s = 0;
};

// Exactly max_new_tokens per sequence (no stop token: the seed forces min = max new tokens).
StatusOr<Generation> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens);

struct BenchmarkOptions {
  int64_t max_new_tokens = 32;
  int iterations = 3;
  int warmup = 1;
  // Called once after the warm-up runs (in a comparison: in tuned mode) and before the timed
  // ones: where the in-context check of the tuned choices goes (tunableop/in_context.h).
  // Returns how many generations it ran, so that per-run counts leave them out.
  std::function<StatusOr<int>()> after_warmup;
};

struct BenchmarkReport {
  int64_t batch = 0, prompt_tokens = 0, padded_prompt_tokens = 0, new_tokens = 0;
  int iterations = 0, warmup = 0;
  int64_t generated_tokens = 0;    // iterations * batch * new_tokens
  double total_s = 0;              // timed iterations only
  std::vector<double> run_s;       // each timed iteration (in a comparison: paired by index)
  double tokens_per_s = 0;         // generated_tokens / total_s (the seed's number)
  double ttft_ms = 0;              // median over timed iterations
  double tpot_ms = 0;              // mean decode step over timed iterations
  double latency_ms = 0;           // ttft + tpot * (new_tokens - 1)
  double decode_tokens_per_s = 0;  // batch / tpot
  double warmup_s = 0;             // includes any tuning done on the first pass
  int64_t weight_bytes = 0;
  double decode_weight_gbps = 0;        // weight_bytes / TPOT: compare with the memory bandwidth
  double prefill_gflop = 0;             // GEMM work of one prefill: / TTFT = achieved rate
  double prefill_attention_gflop = 0;   // attention op work of one prefill (causal: the visible pairs)
  std::vector<int32_t> first_sequence;  // new tokens of sequence 0 in the last run
  std::vector<LinearOp::Problem> gemm_problems, attention_problems;
  int64_t gemm_calls_per_run = 0;
  KvCacheStats kv_cache;  // after the last run (peak: over all runs)
};

StatusOr<BenchmarkReport> run_benchmark(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                        const BenchmarkOptions& o);

// Untuned and tuned in one process, alternating run by run; `set_mode(tuned)` switches the
// engine's context (TunableOp off -> every GEMM runs Default; on -> tuned solutions).
// Tuned over untuned speed as the median of the iterations' paired ratios (untuned run i's time
// over tuned run i's, the two run back to back): a disturbed run moves one ratio, not the
// result, where the totals' ratio takes it whole. 0 without pairs.
double paired_speedup(const BenchmarkReport& untuned, const BenchmarkReport& tuned);

StatusOr<std::pair<BenchmarkReport, BenchmarkReport>> run_comparison(Engine& engine,
                                                                     const std::vector<std::vector<int32_t>>& prompts,
                                                                     const BenchmarkOptions& o,
                                                                     const std::function<void(bool tuned)>& set_mode);

// Where one decode step's time goes: prefill `prompts`, `warm` ordinary decode steps (any tuning
// and graph capture happen there), then `steps` decode steps run eagerly with each kernel timed
// (Engine::profile_decode), summarised per kernel.
StatusOr<StepProfile> profile_decode_steps(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int warm,
                                           int steps);

// Where one prefill's time goes (issue 12): `runs` prefills of `prompts` run with each kernel
// timed (Engine::profile_prefill), summarised per kernel, with the host's time to queue them.
StatusOr<StepProfile> profile_prefills(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int runs);

std::string format_report(const BenchmarkReport& r);  // the human-readable block
// "KV cache: static, 256.0 MiB ..." / "KV cache: paged (pages of 64 positions), peak ..."
std::string format_kv_cache(const KvCacheStats& kv, int64_t batch);
std::string report_json(const BenchmarkReport& r);  // one JSON object

}  // namespace tunableop::llm
