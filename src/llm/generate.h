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

// How greedy decode steps are driven (issue 13).
//   kHost:   each step's ids, positions and lengths uploaded by the host, the step run, its tokens
//            downloaded and waited for before the next step is queued (Engine::decode).
//   kDevice: step N+1 queued before token N is read back (Engine::decode_ahead / collect_ahead):
//            the argmax of a step writes the next step's ids and advances positions and lengths
//            on the device, so the host's turn (launch, copy, stop checks) overlaps the GPU's
//            step. Stop conditions are checked one step late: a step queued past a stop is
//            computed and its tokens dropped. Falls back to kHost where the engine does not
//            support it. Tokens are identical to kHost's.
//   kAuto:   kDevice on CUDA (measured faster, same tokens), kHost elsewhere.
enum class DecodeLoop { kAuto, kHost, kDevice };
const char* decode_loop_name(DecodeLoop loop);  // "auto", "host", "device"

struct GenerateOptions {
  int64_t max_new_tokens = 1;
  DecodeLoop loop = DecodeLoop::kAuto;
  // kDevice: steps queued beyond the one whose tokens are read next (1..Engine::kMaxAhead - 1).
  int ahead = 1;
  // >= 0: a sequence ends with this token (kept); generation ends when every sequence has ended
  // or reached max_new_tokens. Sequences that ended keep being computed with the others (their
  // rows are not masked) and their later tokens are dropped. -1: exactly max_new_tokens each.
  int32_t stop_token = -1;
};

// The loop that `loop` resolves to on `engine`.
DecodeLoop resolve_decode_loop(const Engine& engine, DecodeLoop loop);

// Exactly max_new_tokens per sequence (no stop token: the seed forces min = max new tokens).
StatusOr<Generation> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int64_t max_new_tokens);
// Per `o`: tokens per sequence up to max_new_tokens, or up to and including its stop token.
StatusOr<Generation> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateOptions& o);

struct BenchmarkOptions {
  int64_t max_new_tokens = 32;
  int iterations = 3;
  int warmup = 1;
  // Called once after the warm-up runs (in a comparison: in tuned mode) and before the timed
  // ones: where the in-context check of the tuned choices goes (tunableop/in_context.h).
  // Returns how many generations it ran, so that per-run counts leave them out.
  std::function<StatusOr<int>()> after_warmup;
  DecodeLoop loop = DecodeLoop::kAuto;  // the loop the report times
  // Also the other loop (host vs device), run by run alternating with `loop` in the same process
  // (warm-up and timed runs alike): BenchmarkReport::loops.
  bool compare_loops = false;
};

// The host and device decode loops timed side by side (BenchmarkOptions::compare_loops).
struct LoopComparison {
  bool done = false;
  double host_tpot_ms = 0, device_tpot_ms = 0;  // mean decode step of each
  double host_tokens_per_s = 0, device_tokens_per_s = 0;
  double paired_speedup = 0;  // median over runs of host run time / device run time (back to back)
  bool identical = true;      // every run's tokens equal between the loops
  int runs = 0;
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
  KvCacheStats kv_cache;    // after the last run (peak: over all runs)
  std::string decode_loop;  // the loop timed: "host" or "device"
  LoopComparison loops;     // compare_loops only
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
