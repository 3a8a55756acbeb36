// `tunableop llm`'s bench mode (llm_bench_mode.h): the seed's timed greedy generation, alone or
// untuned against tuned (--compare), and what is measured after it (bandwidth, kernel choices,
// profiles).
#include "llm_bench_mode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_support.h"
#include "llm/generate.h"
#include "llm/text/text_stream.h"
#include "llm_tp.h"
#include "tunableop/in_context.h"

namespace tunableop::cli {

int llm_fail(const Status& s) {
  fmt::print(stderr, "tunableop llm: {}\n", printable(s.to_string()));
  return 2;
}

std::string join_ids(const std::vector<int32_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

int64_t profile_warmup(int64_t max_new) { return std::max<int64_t>(2, max_new / 2); }

namespace {

// After a benchmark (issue 13): the copy ceiling measured now and the decode traffic against it,
// the kernels the device chose by measurement, and where one decode step's time goes. JSON: the
// same as fields of one object (empty when nothing was asked).
struct BenchExtras {
  double copy_gbps = 0;
  std::string choices;
  llm::StepProfile profile;
  llm::StepProfile prefill_profile;
  std::string prefill_served;  // with the prefill profile: what serves each prefill problem
};

// Each prefill problem (GEMM, attention) with the solution the results serve and its tuned time
// as a rate, one line each: what the prefill breakdown's rates compare with.
std::string prefill_solutions(Context& ctx, llm::Engine& engine) {
  std::string s;
  auto add = [&](const std::vector<llm::LinearOp::Problem>& problems) {
    for (const auto& p : problems) {
      if (!p.in_prefill) continue;
      const auto e = ctx.results().lookup(p.op, p.params);
      s += fmt::format("  {} {}: {}", p.op, p.params, e ? e->solution : "not in the results (Default)");
      if (e && e->time_ms > 0 && p.flops > 0) {
        s += fmt::format(", tuned alone {:.4f} ms = {:.1f} TFLOP/s", e->time_ms, p.flops / e->time_ms / 1e9);
      }
      s += e && !e->note.empty() ? " (" + e->note + ")\n" : "\n";
    }
  };
  add(engine.linear().problems());
  add(engine.linear().attention_problems());
  return s;
}

StatusOr<BenchExtras> bench_extras(const LlmArgs& a, Context& ctx, llm::Engine& engine,
                                   const std::vector<std::vector<int32_t>>& prompts, int64_t max_new) {
  BenchExtras x;
  if (a.measure_bandwidth) {
    auto bw = engine.copy_bandwidth_gbps();
    if (!bw.is_ok()) return bw.status();
    x.copy_gbps = *bw;
  }
  x.choices = engine.kernel_choices();
  if (a.profile_decode > 0) {
    auto p = llm::profile_decode_steps(engine, prompts, int(profile_warmup(max_new)), a.profile_decode);
    if (!p.is_ok()) return p.status();
    x.profile = std::move(p.value());
  }
  if (a.profile_prefill > 0) {
    auto p = llm::profile_prefills(engine, prompts, a.profile_prefill);
    if (!p.is_ok()) return p.status();
    x.prefill_profile = std::move(p.value());
    if (ctx.config().snapshot().enabled) x.prefill_served = prefill_solutions(ctx, engine);
  }
  return x;
}

void print_extras(const BenchExtras& x, const std::vector<const llm::BenchmarkReport*>& reports,
                  const std::vector<std::string>& names) {
  if (x.copy_gbps > 0) {
    fmt::print(
        "Copy ceiling: {:.0f} GB/s (device copy, bytes read + written, measured in this run); decode weight "
        "traffic at",
        x.copy_gbps);
    for (size_t i = 0; i < reports.size(); ++i) {
      fmt::print("{} {:.1f}% ({})", i ? "," : "", 100 * reports[i]->decode_weight_gbps / x.copy_gbps, names[i]);
    }
    fmt::print(" of it\n");
  }
  if (!x.choices.empty()) {
    fmt::print("Kernels chosen by measurement:\n");
    std::istringstream lines(x.choices);
    for (std::string line; std::getline(lines, line);) fmt::print("  {}\n", line);
  }
  if (x.profile.steps > 0) fmt::print("{}", llm::format_profile(x.profile, reports.back()->tpot_ms));
  if (x.prefill_profile.steps > 0) {
    fmt::print("{}", llm::format_prefill_profile(x.prefill_profile, reports.back()->ttft_ms));
    if (!x.prefill_served.empty()) fmt::print("Prefill problems as the results serve them:\n{}", x.prefill_served);
  }
}

std::string extras_json(const BenchExtras& x, const llm::BenchmarkReport& r) {
  nlohmann::json j;
  j["copy_gbps"] = x.copy_gbps;
  j["decode_fraction_of_copy"] = x.copy_gbps > 0 ? r.decode_weight_gbps / x.copy_gbps : 0.0;
  j["kernel_choices"] = x.choices;
  if (x.profile.steps > 0) j["decode_profile"] = nlohmann::json::parse(llm::profile_json(x.profile, r.tpot_ms));
  if (x.prefill_profile.steps > 0) {
    j["prefill_profile"] = nlohmann::json::parse(llm::prefill_profile_json(x.prefill_profile, r.ttft_ms));
    j["prefill_served"] = x.prefill_served;
  }
  return j.dump();
}

// The paired runs' range, and what it says: " (runs from 0.95x to 1.10x: within this machine's
// noise)". Each run of one mode is paired with the run of the other that followed it.
std::string paired_spread(const std::pair<llm::BenchmarkReport, llm::BenchmarkReport>& r) {
  std::vector<double> ratios;
  for (size_t i = 0; i < r.first.run_s.size() && i < r.second.run_s.size(); ++i)
    if (r.second.run_s[i] > 0) ratios.push_back(r.first.run_s[i] / r.second.run_s[i]);
  if (ratios.size() < 2) return "";
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  const char* says = *lo > 1.0   ? "tuned faster in every run"
                     : *hi < 1.0 ? "tuned slower in every run: the in-context check below says which choices it kept"
                                 : "within this machine's noise";
  return fmt::format(" (runs from {:.3f}x to {:.3f}x: {})", *lo, *hi, says);
}

}  // namespace

// The seed's measurement: greedy, exactly max_new tokens. Text prompts (Example 2's "Hello
// Earthlings!") are tokenized first; the first sequence's text is printed after the metrics.
int run_bench(const LlmArgs& a, llm::Engine& engine, Context& ctx, const std::string& model_desc,
              const llm::Tokenizer* tokenizer, const std::vector<std::vector<int32_t>>& prompts, int64_t padded,
              int64_t max_new) {
  const int64_t batch = int64_t(prompts.size());
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  // The continuation of the first prompt as text, when it came as text.
  auto text_of = [&](const std::vector<int32_t>& ids) -> std::string {
    if (!tokenizer) return "";
    auto t = llm::decode_continuation(*tokenizer, prompts[0], ids);
    return t.is_ok() ? *t : "(" + t.status().to_string() + ")";
  };
  llm::BenchmarkOptions bo{max_new, a.iterations, a.warmup, {}};
  bo.loop = a.decode_loop == "device" ? llm::DecodeLoop::kDevice
            : a.decode_loop == "host" ? llm::DecodeLoop::kHost
                                      : llm::DecodeLoop::kAuto;
  bo.compare_loops = a.compare_decode_loops;
  const Options opts = ctx.config().snapshot();
  // After the tuning warm-up: the whole generation with the tuned choices against Default,
  // interleaved; the choices that lose in context are dropped (tunableop/in_context.h).
  std::optional<InContextReport> in_context;
  // Not with --tp yet: each rank dispatches through its own context, which the check (switching
  // choices in `ctx`) does not reach.
  if (!a.no_in_context_check && a.tp <= 1 && (a.compare || (opts.enabled && opts.tuning))) {
    bo.after_warmup = [&]() -> StatusOr<int> {
      auto r = check_in_context(ctx, [&] { return llm::generate(engine, prompts, max_new).status(); });
      if (!r.is_ok()) return r.status();
      in_context = *r;
      // One more untimed run with the choices the check left in force: the engine re-prepares
      // for them at its next run (CUDA: decode graphs re-captured, step variants timed again,
      // ~0.2-0.5 s), which would otherwise land in the first timed run and its TPOT mean.
      auto settle = llm::generate(engine, prompts, max_new);
      if (!settle.is_ok()) return settle.status();
      return r->workload_runs + 1;
    };
  }
  auto in_context_json = [&]() -> std::string {
    if (!in_context) return "";
    return fmt::format(", \"in_context\": {{\"choices\": {}, \"kept\": {}, \"ratio_before\": {}, \"ratio_after\": {}}}",
                       in_context->choices, in_context->kept, in_context->ratio_before, in_context->ratio_after);
  };
  auto print_in_context = [&] {
    if (!in_context) return;
    fmt::print("In-context check: {} ({} runs, {:.1f} s)\n", in_context->summary(), in_context->workload_runs,
               in_context->elapsed_ms / 1e3);
    // The post-decision guard's reverts, each written to the results file as Default.
    for (const auto& d : in_context->dropped)
      fmt::print("  reverted to Default: {}({}) {}\n", d.op, d.params, d.solution);
  };
  if (!a.json) {
    fmt::print("Model: {}\n", model_desc);
    fmt::print("Device: {}; batch {}; prompt {} tokens padded to {}; {} new tokens; {} warm-up + {} timed runs\n",
               engine.device_name(), batch, longest, padded, max_new, a.warmup, a.iterations);
  }

  if (a.compare) {
    auto r = llm::run_comparison(engine, prompts, bo, [&](bool tuned) { set_tunableop_mode(engine, ctx, tuned); });
    if (!r.is_ok()) return llm_fail(r.status());
    auto extras = bench_extras(a, ctx, engine, prompts, max_new);  // in the tuned mode, the last one set
    if (!extras.is_ok()) return llm_fail(extras.status());
    const double speedup = r->first.tokens_per_s > 0 ? r->second.tokens_per_s / r->first.tokens_per_s : 0;
    const double paired = llm::paired_speedup(r->first, r->second);
    if (a.json) {
      fmt::print(
          "{{\"model\": \"{}\", \"device\": \"{}\", \"untuned\": {}, \"tuned\": {}, \"speedup\": {}, "
          "\"speedup_paired_median\": {}, \"results_file\": \"{}\", \"extras\": {}{}}}\n",
          a.model, engine.device_name(), llm::report_json(r->first), llm::report_json(r->second), speedup, paired,
          ctx.results_path(), extras_json(*extras, r->second), in_context_json());
    } else {
      fmt::print("Untuned (TunableOp off: Default GEMMs)\n{}", llm::format_report(r->first));
      fmt::print("Tuned (results file {})\n{}", ctx.results_path(), llm::format_report(r->second));
      fmt::print("Speedup: {:.3f}x tokens/s (tuned / untuned); median of the {} paired runs: {:.3f}x{}\n", speedup,
                 std::min(r->first.run_s.size(), r->second.run_s.size()), paired, paired_spread(*r));
      print_in_context();
      if (r->first.first_sequence != r->second.first_sequence) {
        fmt::print("Note: tuned and untuned generated different tokens (GEMM rounding differs between solutions)\n");
      }
      print_extras(*extras, {&r->first, &r->second}, {"untuned", "tuned"});
      if (tokenizer) fmt::print("Text: {}\n", text_of(r->second.first_sequence));
    }
    if (a.print_ids) fmt::print("{}\n", join_ids(r->second.first_sequence));
    return 0;
  }

  auto r = llm::run_benchmark(engine, prompts, bo);
  if (!r.is_ok()) return llm_fail(r.status());
  auto extras = bench_extras(a, ctx, engine, prompts, max_new);
  if (!extras.is_ok()) return llm_fail(extras.status());
  if (a.json) {
    std::string j = llm::report_json(*r);
    j.pop_back();  // add context to the object
    if (tokenizer) j += ", \"generated_text\": " + nlohmann::json(text_of(r->first_sequence)).dump();
    j += ", \"extras\": " + extras_json(*extras, *r);
    fmt::print(
        "{}, \"model\": \"{}\", \"device\": \"{}\", \"tunableop_enabled\": {}, \"tuning\": {}, "
        "\"results_file\": \"{}\"{}}}\n",
        j, a.model, engine.device_name(), opts.enabled, opts.tuning, ctx.results_path(), in_context_json());
  } else {
    fmt::print("TunableOp: {}{}\n",
               opts.enabled ? (opts.tuning ? "on, tuning" : "on, no tuning") : "off (Default GEMMs)",
               opts.enabled ? ", results file " + ctx.results_path() : "");
    fmt::print("{}", llm::format_report(*r));
    print_in_context();
    print_extras(*extras, {&*r}, {opts.enabled ? "tuned" : "untuned"});
    if (tokenizer) fmt::print("Text: {}\n", text_of(r->first_sequence));
  }
  if (a.print_ids) fmt::print("{}\n", join_ids(r->first_sequence));
  return 0;
}

}  // namespace tunableop::cli
