#include "llm/generate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "tunableop/tuner.h"

namespace tunableop::llm {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

const char* decode_loop_name(DecodeLoop loop) {
  return loop == DecodeLoop::kHost ? "host" : loop == DecodeLoop::kDevice ? "device" : "auto";
}

DecodeLoop resolve_decode_loop(const Engine& engine, DecodeLoop loop) {
  if (!engine.decode_ahead_supported() || loop == DecodeLoop::kHost) return DecodeLoop::kHost;
  if (loop == DecodeLoop::kDevice) return DecodeLoop::kDevice;
  // kAuto: the device loop on CUDA, where it was measured faster with identical tokens (H100,
  // docs/results/decode/README.md, run 9: 1.009x Gemma-2B, 1.011x Llama-2-7B); the CPU engine's
  // step dwarfs the host's turn, so it keeps the plain loop.
  return engine.device_name().rfind("cuda", 0) == 0 ? DecodeLoop::kDevice : DecodeLoop::kHost;
}

StatusOr<Generation> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                              int64_t max_new_tokens) {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  return generate(engine, prompts, o);
}

StatusOr<Generation> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                              const GenerateOptions& o) {
  const int64_t max_new_tokens = o.max_new_tokens;
  if (max_new_tokens < 1) return Status::invalid_argument("max_new_tokens must be >= 1");
  if (prompts.empty()) return Status::invalid_argument("generate: no prompts");
  if (o.ahead < 1 || o.ahead >= Engine::kMaxAhead) {
    return Status::invalid_argument("generate: ahead must be in 1.." + std::to_string(Engine::kMaxAhead - 1));
  }
  const int64_t padded = round_up(
      int64_t(std::max_element(prompts.begin(), prompts.end(), [](auto& a, auto& b) { return a.size() < b.size(); })
                  ->size()),
      engine.options().pad_multiple);
  // Decode writes the cache at each sequence's real length; the longest needs room for all.
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  if (std::max(padded, longest + max_new_tokens - 1) > engine.options().max_seq) {
    return Status::invalid_argument("prompt (" + std::to_string(longest) + " tokens, padded " + std::to_string(padded) +
                                    ") + " + std::to_string(max_new_tokens) +
                                    " new tokens do not fit the KV cache of " +
                                    std::to_string(engine.options().max_seq) + " positions");
  }
  Generation g;
  g.tokens.resize(prompts.size());
  std::vector<bool> ended(prompts.size(), false);
  size_t live = prompts.size();
  // Appends a step's tokens to the sequences still going; false once every one has ended.
  auto take = [&](const std::vector<int32_t>& next) {
    for (size_t b = 0; b < prompts.size(); ++b) {
      if (ended[b]) continue;
      g.tokens[b].push_back(next[b]);
      if (o.stop_token >= 0 && next[b] == o.stop_token) ended[b] = true, --live;
    }
    return live > 0;
  };
  std::vector<int32_t> next;
  auto t0 = Clock::now();
  TUNABLEOP_RETURN_IF_ERROR(engine.prefill(prompts, &next));
  g.ttft_s = seconds_since(t0);
  const int64_t steps = max_new_tokens - 1;  // decode steps for max_new_tokens tokens
  if (take(next) && steps > 0) {
    if (resolve_decode_loop(engine, o.loop) == DecodeLoop::kDevice) {
      // Step k+1 (and up to `ahead` more) is queued before step k's tokens are read back, so the
      // host's turn (the graph launch, the tokens' copy and the stop checks) overlaps the GPU's
      // step. The first step takes the prefill's tokens from the host; each later one takes its
      // inputs from the step before it, on the device. A stop seen in step k's tokens leaves the
      // steps after k computed and dropped (the next prefill would drop them too; done here, so
      // that their time counts in this generation's).
      auto ts = Clock::now();
      TUNABLEOP_RETURN_IF_ERROR(engine.decode_ahead(&next));
      int64_t queued = 1, collected = 0;
      bool going = true;
      while (going && collected < steps) {
        while (queued < steps && queued - collected <= o.ahead) {
          TUNABLEOP_RETURN_IF_ERROR(engine.decode_ahead(nullptr));
          ++queued;
        }
        TUNABLEOP_RETURN_IF_ERROR(engine.collect_ahead(&next));
        ++collected;
        const auto now = Clock::now();
        g.step_s.push_back(std::chrono::duration<double>(now - ts).count());
        ts = now;
        going = take(next);
      }
      for (; collected < queued; ++collected) TUNABLEOP_RETURN_IF_ERROR(engine.collect_ahead(&next));
    } else {
      for (int64_t i = 0; i < steps; ++i) {
        auto ts = Clock::now();
        std::vector<int32_t> in = next;
        TUNABLEOP_RETURN_IF_ERROR(engine.decode(in, &next));
        g.step_s.push_back(seconds_since(ts));
        if (!take(next)) break;
      }
    }
  }
  g.total_s = seconds_since(t0);
  return g;
}

namespace {

// Collects timed generations into a report; the statistics are the library's (the tuner's
// summarize), not our own.
struct Accumulator {
  std::vector<double> ttft_ms, step_ms;
  double total = 0;
  std::vector<double> runs;
  std::vector<int32_t> first;
  void add(const Generation& g) {
    ttft_ms.push_back(g.ttft_s * 1e3);
    for (double s : g.step_s) step_ms.push_back(s * 1e3);
    total += g.total_s;
    runs.push_back(g.total_s);
    first = g.tokens[0];
  }
  BenchmarkReport finish(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                         const BenchmarkOptions& o) const {
    BenchmarkReport r;
    r.batch = int64_t(prompts.size());
    for (const auto& p : prompts) r.prompt_tokens = std::max<int64_t>(r.prompt_tokens, int64_t(p.size()));
    r.padded_prompt_tokens = engine.padded_prompt_length();
    r.new_tokens = o.max_new_tokens;
    r.iterations = o.iterations;
    r.warmup = o.warmup;
    r.total_s = total;
    r.run_s = runs;
    r.generated_tokens = int64_t(ttft_ms.size()) * r.batch * r.new_tokens;
    r.tokens_per_s = total > 0 ? double(r.generated_tokens) / total : 0;
    r.ttft_ms = summarize(ttft_ms).median_ms;
    r.tpot_ms = summarize(step_ms).mean_ms;
    r.latency_ms = r.ttft_ms + r.tpot_ms * double(r.new_tokens - 1);
    r.decode_tokens_per_s = r.tpot_ms > 0 ? double(r.batch) / (r.tpot_ms * 1e-3) : 0;
    r.first_sequence = first;
    r.gemm_problems = engine.linear().problems();
    r.attention_problems = engine.linear().attention_problems();
    r.kv_cache = engine.kv_cache_stats();
    r.weight_bytes = engine.weight_bytes();
    r.decode_weight_gbps = r.tpot_ms > 0 ? double(r.weight_bytes) / (r.tpot_ms * 1e-3) / 1e9 : 0;
    return r;
  }
};

double prefill_gflop(const std::vector<LinearOp::Problem>& problems, int runs) {
  double f = 0;
  for (const auto& p : problems) f += double(p.prefill_calls) * p.flops;
  return f / double(runs) / 1e9;
}

Status check_options(const BenchmarkOptions& o) {
  if (o.iterations < 1) return Status::invalid_argument("iterations must be >= 1");
  if (o.warmup < 0) return Status::invalid_argument("warmup must be >= 0");
  return Status::ok();
}

}  // namespace

StatusOr<BenchmarkReport> run_benchmark(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                        const BenchmarkOptions& o) {
  TUNABLEOP_RETURN_IF_ERROR(check_options(o));
  engine.linear().reset_counts();
  GenerateOptions go;
  go.max_new_tokens = o.max_new_tokens;
  go.loop = resolve_decode_loop(engine, o.loop);
  // compare_loops: the other loop too, run by run alternating which goes first.
  GenerateOptions other = go;
  other.loop = go.loop == DecodeLoop::kDevice ? DecodeLoop::kHost : DecodeLoop::kDevice;
  const bool compare = o.compare_loops && resolve_decode_loop(engine, other.loop) == other.loop;
  int runs_per_iteration = compare ? 2 : 1;
  Accumulator acc, acc_other;
  bool identical = true;
  std::vector<double> ratios;  // host run / device run
  // One iteration: `go` (and `other`), into acc (and acc_other) when `timed`.
  auto iteration = [&](int i, bool timed) -> Status {
    std::optional<Generation> mine, theirs;
    for (int k = 0; k < runs_per_iteration; ++k) {
      const bool first_is_mine = !compare || i % 2 == 0;
      const bool is_mine = (k == 0) == first_is_mine;
      auto g = generate(engine, prompts, is_mine ? go : other);
      if (!g.is_ok()) return g.status();
      (is_mine ? mine : theirs) = std::move(g.value());
    }
    if (!timed) return Status::ok();
    acc.add(*mine);
    if (compare) {
      acc_other.add(*theirs);
      identical = identical && mine->tokens == theirs->tokens;
      const Generation& host = go.loop == DecodeLoop::kHost ? *mine : *theirs;
      const Generation& device = go.loop == DecodeLoop::kHost ? *theirs : *mine;
      if (device.total_s > 0) ratios.push_back(host.total_s / device.total_s);
    }
    return Status::ok();
  };
  auto tw = Clock::now();
  for (int i = 0; i < o.warmup; ++i) TUNABLEOP_RETURN_IF_ERROR(iteration(i, false));
  const double warmup_s = seconds_since(tw);
  int extra = 0;
  if (o.after_warmup) {
    auto n = o.after_warmup();
    if (!n.is_ok()) return n.status();
    extra = *n;
  }
  for (int i = 0; i < o.iterations; ++i) TUNABLEOP_RETURN_IF_ERROR(iteration(i, true));
  BenchmarkReport r = acc.finish(engine, prompts, o);
  r.warmup_s = warmup_s;
  r.decode_loop = decode_loop_name(go.loop);
  if (compare) {
    const BenchmarkReport b = acc_other.finish(engine, prompts, o);
    const BenchmarkReport& host = go.loop == DecodeLoop::kHost ? r : b;
    const BenchmarkReport& device = go.loop == DecodeLoop::kHost ? b : r;
    r.loops.done = true;
    r.loops.host_tpot_ms = host.tpot_ms;
    r.loops.device_tpot_ms = device.tpot_ms;
    r.loops.host_tokens_per_s = host.tokens_per_s;
    r.loops.device_tokens_per_s = device.tokens_per_s;
    r.loops.paired_speedup = median(ratios);
    r.loops.identical = identical;
    r.loops.runs = int(ratios.size());
  }
  const int runs = (o.iterations + o.warmup) * runs_per_iteration + extra;
  r.gemm_calls_per_run = engine.linear().calls() / runs;
  r.prefill_gflop = prefill_gflop(r.gemm_problems, runs);
  r.prefill_attention_gflop = prefill_gflop(r.attention_problems, runs);
  return r;
}

StatusOr<std::pair<BenchmarkReport, BenchmarkReport>> run_comparison(Engine& engine,
                                                                     const std::vector<std::vector<int32_t>>& prompts,
                                                                     const BenchmarkOptions& o,
                                                                     const std::function<void(bool tuned)>& set_mode) {
  TUNABLEOP_RETURN_IF_ERROR(check_options(o));
  engine.linear().reset_counts();
  double warmup_s[2] = {0, 0};
  Accumulator acc[2];
  int extra = 0;
  // Warm-up first (the tuned one tunes here), then alternate untuned/tuned so that drift in the
  // machine's state (clocks, other load) hits both sides alike.
  for (int i = 0; i < o.warmup + o.iterations; ++i) {
    if (i == o.warmup && o.after_warmup) {
      set_mode(true);
      auto n = o.after_warmup();
      if (!n.is_ok()) return n.status();
      extra = *n;
    }
    for (int tuned = 0; tuned < 2; ++tuned) {
      set_mode(tuned == 1);
      auto t0 = Clock::now();
      GenerateOptions go;
      go.max_new_tokens = o.max_new_tokens;
      go.loop = o.loop;
      auto g = generate(engine, prompts, go);
      if (!g.is_ok()) return g.status();
      if (i < o.warmup) {
        warmup_s[tuned] += seconds_since(t0);
      } else {
        acc[tuned].add(*g);
      }
    }
  }
  std::pair<BenchmarkReport, BenchmarkReport> out{acc[0].finish(engine, prompts, o), acc[1].finish(engine, prompts, o)};
  out.first.warmup_s = warmup_s[0];
  out.second.warmup_s = warmup_s[1];
  const int runs = 2 * (o.iterations + o.warmup) + extra;
  out.first.gemm_calls_per_run = out.second.gemm_calls_per_run = engine.linear().calls() / runs;
  out.first.prefill_gflop = out.second.prefill_gflop = prefill_gflop(out.first.gemm_problems, runs);
  out.first.prefill_attention_gflop = out.second.prefill_attention_gflop =
      prefill_gflop(out.first.attention_problems, runs);
  return out;
}

double paired_speedup(const BenchmarkReport& untuned, const BenchmarkReport& tuned) {
  std::vector<double> ratios;
  for (size_t i = 0; i < untuned.run_s.size() && i < tuned.run_s.size(); ++i)
    if (tuned.run_s[i] > 0) ratios.push_back(untuned.run_s[i] / tuned.run_s[i]);
  return median(ratios);
}

StatusOr<StepProfile> profile_decode_steps(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int warm,
                                           int steps) {
  if (steps < 1 || warm < 0) return Status::invalid_argument("profile: steps must be >= 1 and warm-up >= 0");
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  if (longest + warm + steps > engine.options().max_seq) {
    return Status::invalid_argument("profile: prompt + " + std::to_string(warm + steps) +
                                    " decode steps do not fit the KV cache of " +
                                    std::to_string(engine.options().max_seq) + " positions");
  }
  std::vector<int32_t> next;
  TUNABLEOP_RETURN_IF_ERROR(engine.prefill(prompts, &next));
  for (int i = 0; i < warm; ++i) {
    std::vector<int32_t> in = next;
    TUNABLEOP_RETURN_IF_ERROR(engine.decode(in, &next));
  }
  std::vector<std::vector<ProfileSpan>> all;
  const auto lengths = engine.sequence_lengths();
  const int64_t position = lengths.empty() ? 0 : lengths[0];
  for (int i = 0; i < steps; ++i) {
    std::vector<int32_t> in = next;
    auto spans = engine.profile_decode(in, &next);
    if (!spans.is_ok()) return spans.status();
    all.push_back(std::move(spans.value()));
  }
  StepProfile p = summarize_profile(all);
  p.position = position;
  return p;
}

StatusOr<StepProfile> profile_prefills(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int runs) {
  if (runs < 1) return Status::invalid_argument("profile: prefills must be >= 1");
  std::vector<std::vector<ProfileSpan>> all;
  double host_ms = 0;
  for (int i = 0; i < runs; ++i) {
    std::vector<int32_t> next;
    double ms = 0;
    auto spans = engine.profile_prefill(prompts, &next, &ms);
    if (!spans.is_ok()) return spans.status();
    all.push_back(std::move(spans.value()));
    host_ms += ms / runs;
  }
  StepProfile p = summarize_profile(all);
  p.host_ms = host_ms;
  return p;
}

std::string format_report(const BenchmarkReport& r) {
  int prefill = 0, decode = 0;
  for (const auto& p : r.gemm_problems) {
    prefill += p.in_prefill;
    decode += p.in_decode;
  }
  char buf[1024];
  std::string s;
  std::snprintf(buf, sizeof(buf), "  Tokens/second: %.4f (%lld tokens, %.2f seconds)\n", r.tokens_per_s,
                (long long)r.generated_tokens, r.total_s);
  s += buf;
  std::snprintf(buf, sizeof(buf), "  TTFT: %.3f ms (prompt %lld tokens, padded to %lld, batch %lld)\n", r.ttft_ms,
                (long long)r.prompt_tokens, (long long)r.padded_prompt_tokens, (long long)r.batch);
  s += buf;
  if (r.new_tokens > 1) {
    std::snprintf(buf, sizeof(buf),
                  "  TPOT: %.3f ms (%.1f tokens/s per sequence, %.1f in total over the batch of %lld, while "
                  "decoding)\n"
                  "  Latency: %.3f ms = TTFT + TPOT x %lld\n",
                  r.tpot_ms, r.tpot_ms > 0 ? 1e3 / r.tpot_ms : 0.0, r.decode_tokens_per_s, (long long)r.batch,
                  r.latency_ms, (long long)(r.new_tokens - 1));
  } else {
    std::snprintf(buf, sizeof(buf), "  TPOT: none (1 new token)\n  Latency: %.3f ms = TTFT\n", r.latency_ms);
  }
  s += buf;
  const double prefill_work = r.prefill_gflop + r.prefill_attention_gflop;
  if (r.prefill_attention_gflop > 0) {
    std::snprintf(buf, sizeof(buf), "  Prefill GEMMs: %.2f GFLOP + attention %.2f GFLOP (%.1f GFLOP/s at this TTFT)\n",
                  r.prefill_gflop, r.prefill_attention_gflop, r.ttft_ms > 0 ? prefill_work / (r.ttft_ms * 1e-3) : 0.0);
  } else {
    std::snprintf(buf, sizeof(buf), "  Prefill GEMMs: %.2f GFLOP (%.1f GFLOP/s at this TTFT)\n", r.prefill_gflop,
                  r.ttft_ms > 0 ? r.prefill_gflop / (r.ttft_ms * 1e-3) : 0.0);
  }
  s += buf;
  if (r.new_tokens > 1) {
    std::snprintf(buf, sizeof(buf), "  Decode: %.1f MB of weights per step, %.1f GB/s at this TPOT; %s loop\n",
                  double(r.weight_bytes) / 1e6, r.decode_weight_gbps,
                  r.decode_loop.empty() ? "host" : r.decode_loop.c_str());
    s += buf;
  }
  if (r.loops.done) {
    std::snprintf(buf, sizeof(buf),
                  "  Decode loops (same process, runs alternating): host TPOT %.3f ms, device TPOT %.3f ms "
                  "(%.3fx; median of %d paired runs %.3fx); tokens %s\n",
                  r.loops.host_tpot_ms, r.loops.device_tpot_ms,
                  r.loops.device_tpot_ms > 0 ? r.loops.host_tpot_ms / r.loops.device_tpot_ms : 0.0, r.loops.runs,
                  r.loops.paired_speedup, r.loops.identical ? "identical" : "DIFFER");
    s += buf;
  }
  std::snprintf(buf, sizeof(buf),
                "  GEMM problems: %zu distinct (prefill %d, decode %d), %lld GEMM calls per run; warm-up %.2f s\n",
                r.gemm_problems.size(), prefill, decode, (long long)r.gemm_calls_per_run, r.warmup_s);
  s += buf;
  if (!r.attention_problems.empty()) {
    std::snprintf(buf, sizeof(buf), "  Attention problems: %zu distinct\n", r.attention_problems.size());
    s += buf;
  }
  s += "  " + format_kv_cache(r.kv_cache, r.batch) + "\n";
  return s;
}

std::string format_kv_cache(const KvCacheStats& kv, int64_t batch) {
  char buf[512];
  const double mib = 1024.0 * 1024.0;
  if (kv.kind == KvCacheKind::kStatic) {
    std::snprintf(buf, sizeof(buf), "KV cache: static, %.1f MiB allocated and held (batch %lld)",
                  double(kv.allocated) / mib, (long long)batch);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "KV cache: paged (pages of %lld positions), peak %.1f MiB in use (%.1f MiB now) of a %.1f MiB pool "
                  "of %lld pages; a static cache for this batch of %lld: %.1f MiB",
                  (long long)kv.page_size, double(kv.peak_in_use) / mib, double(kv.in_use) / mib,
                  double(kv.allocated) / mib, (long long)kv.pages, (long long)batch, double(kv.static_bytes) / mib);
  }
  return buf;
}

std::string report_json(const BenchmarkReport& r) {
  nlohmann::json j;
  j["batch"] = r.batch;
  j["prompt_tokens"] = r.prompt_tokens;
  j["padded_prompt_tokens"] = r.padded_prompt_tokens;
  j["new_tokens"] = r.new_tokens;
  j["iterations"] = r.iterations;
  j["warmup"] = r.warmup;
  j["generated_tokens"] = r.generated_tokens;
  j["total_s"] = r.total_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["ttft_ms"] = r.ttft_ms;
  j["tpot_ms"] = r.tpot_ms;
  j["latency_ms"] = r.latency_ms;
  j["decode_tokens_per_s"] = r.decode_tokens_per_s;
  j["warmup_s"] = r.warmup_s;
  j["gemm_calls_per_run"] = r.gemm_calls_per_run;
  j["weight_bytes"] = r.weight_bytes;
  j["decode_weight_gbps"] = r.decode_weight_gbps;
  j["prefill_gflop"] = r.prefill_gflop;
  j["prefill_attention_gflop"] = r.prefill_attention_gflop;
  for (const char* key : {"gemm_problems", "attention_problems"}) {
    j[key] = nlohmann::json::array();
    for (const auto& p : key[0] == 'g' ? r.gemm_problems : r.attention_problems) {
      j[key].push_back(
          {{"op", p.op}, {"params", p.params}, {"prefill", p.in_prefill}, {"decode", p.in_decode}, {"calls", p.calls}});
    }
  }
  j["decode_loop"] = r.decode_loop;
  if (r.loops.done) {
    j["decode_loops"] = {{"host_tpot_ms", r.loops.host_tpot_ms},
                         {"device_tpot_ms", r.loops.device_tpot_ms},
                         {"host_tokens_per_s", r.loops.host_tokens_per_s},
                         {"device_tokens_per_s", r.loops.device_tokens_per_s},
                         {"paired_speedup", r.loops.paired_speedup},
                         {"identical", r.loops.identical},
                         {"runs", r.loops.runs}};
  }
  const KvCacheStats& kv = r.kv_cache;
  j["kv_cache"] = {{"kind", kv_cache_kind_name(kv.kind)},
                   {"page_size", kv.page_size},
                   {"pages", kv.pages},
                   {"allocated_bytes", kv.allocated},
                   {"in_use_bytes", kv.in_use},
                   {"peak_in_use_bytes", kv.peak_in_use},
                   {"bytes_per_position", kv.bytes_per_position},
                   {"static_bytes", kv.static_bytes}};
  j["generated_ids"] = r.first_sequence;
  return j.dump();
}

}  // namespace tunableop::llm
