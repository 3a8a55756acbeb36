// `tunableop bench`: seed Example 1 (one GEMM, iter/s untuned vs tuned) and LLM shape suites.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "bench_attention.h"
#include "bench_clock.h"
#include "bench_fp8.h"
#include "bench_loop.h"
#include "bench_measure.h"
#include "bench_suites.h"
#include "cli_support.h"
#include "commands.h"
#include "tunableop/cpu_info.h"
#include "tunableop/op_tools.h"
#include "tunableop/safe_file.h"

namespace tunableop::cli {

namespace {

struct BenchArgs {
  int64_t m = 1024, n = 512, k = 2048, batch = 1;  // seed Example 1 in BLAS terms: nn_1024_512_2048
  int64_t lda = 0, ldb = 0, ldc = 0;
  double alpha = 1, beta = 0;
  std::string transa = "N", transb = "N", dtype = "fp32", device = "cpu";
  int gpu = 0;
  int64_t iters = 0;  // 0: as many as fit in about two seconds
  int verbose = -1;
  std::string suite, suite_file, csv, results, baseline, only, shapes_csv;
  int rounds = 5;
  double clock_trace_ms = 0;  // > 0: the suite's shapes traced under sustained load instead of tuned
};

StatusOr<Device> parse_device(const std::string& d, int gpu) {
  if (d == "cpu") return Device::cpu();
  if (d == "cuda" || d == "gpu") return Device::cuda(gpu);
  return Status::invalid_argument(fmt::format("--device must be cpu or cuda, got '{}'", d));
}

int fail(const Status& st) {
  fmt::print(stderr, "tunableop bench: {}\n", printable(st.to_string()));
  return 2;
}

// The two lines above are separate stretches of time; on a shared machine its state moves in
// between (a tuned 0.83x with Default on both sides was seen on a fresh 2-core VM). This is the
// comparison: untuned and tuned alternately, 7 rounds of ~0.15 s a side, the first mover rotating;
// per round the ratio of the two; its median and range. Then what the figures mean.
int compare_interleaved(Context& ctx, const GemmParams& p, const GemmOperands& ops, Timer& timer) {
  // Each side's calls per round sized to ~0.15 s from 3 calls of its own (one call first: a
  // switch of the setting makes the plan decide again).
  int64_t calls[2] = {0, 0};
  for (size_t tuned = 0; tuned < 2; ++tuned) {
    (void)ctx.config().set(Setting::kEnabled, tuned == 1);
    auto probe = time_calls([&] { return gemm(ctx, p, ops); }, 1, 3, 0, timer);
    if (!probe.is_ok()) return fail(probe.status());
    calls[tuned] = std::clamp<int64_t>(int64_t(0.15 / std::max(probe->seconds / 3, 1e-7)), 3, 100000);
  }
  auto arm = [&](size_t tuned) -> StatusOr<double> {
    (void)ctx.config().set(Setting::kEnabled, tuned == 1);
    auto t = time_calls([&] { return gemm(ctx, p, ops); }, 1, calls[tuned], 0, timer);
    if (!t.is_ok()) return t.status();
    return t->seconds * 1e3 / double(calls[tuned]);
  };
  Status failed;
  auto ms = interleaved_rounds(2, InterleavedRounds{7, 7}, timer, arm, [&](size_t, const Status& st) { failed = st; });
  (void)ctx.config().set(Setting::kEnabled, true);
  if (!failed.is_ok()) return fail(failed);
  std::vector<double> ratios;  // tuned speed / untuned speed, per round
  for (size_t r = 0; r < std::min(ms[0].size(), ms[1].size()); ++r) ratios.push_back(ms[0][r] / ms[1][r]);
  if (ratios.empty()) return fail(Status::internal("no interleaved rounds"));
  const double ratio = median(ratios);
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  fmt::print(
      "untuned vs tuned, interleaved ({} rounds of ~0.15 s each side): untuned {:.2f} iter/s, tuned {:.2f} iter/s "
      "(medians); tuned/untuned {:.3f}x, rounds from {:.3f}x to {:.3f}x\n",
      ratios.size(), 1e3 / median(ms[0]), 1e3 / median(ms[1]), ratio, *lo, *hi);
  const auto hit = ctx.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
  const std::string chosen = hit ? hit->solution : "Default";
  if (chosen == "Default") {
    fmt::print(
        "tuning kept Default, the untuned call itself: any difference between the two is this machine's noise\n");
  } else if (*hi < 1.0) {
    const std::string against =
        hit->default_ms > 0 ? fmt::format(" against Default's {:.4g} ms", hit->default_ms) : std::string();
    fmt::print(
        "tuned is slower here in every round: tuning timed {} at {:.4g} ms per call{} on rotating copies of the "
        "inputs (as a program meets them: out of cache), while this loop calls the same buffers again and again "
        "(in cache), where Default does better. A program's own run is what counts: `tunableop tune --in-context` "
        "and the engine's in-context check drop choices that lose in the whole workload (docs/design.md)\n",
        chosen, hit->time_ms, against);
  } else if (*lo < 1.0) {
    fmt::print("tuned ({}) and untuned are within this machine's noise of each other (the rounds straddle 1x)\n",
               chosen);
  } else {
    fmt::print("tuned ({}) is faster in every round\n", chosen);
  }
  return 0;
}

int bench_single(Context& ctx, const BenchArgs& a, void* stream) {
  if (a.clock_trace_ms > 0) return fail(Status::invalid_argument("--clock-trace needs --suite or --suite-file"));
  GemmParams p;
  auto dt = parse_dtype(a.dtype);
  if (!dt.is_ok()) return fail(dt.status());
  p.dtype = *dt;
  p.transa = a.transa.empty() ? '?' : a.transa[0];
  p.transb = a.transb.empty() ? '?' : a.transb[0];
  p.m = a.m, p.n = a.n, p.k = a.k, p.batch = a.batch;
  p.lda = a.lda, p.ldb = a.ldb, p.ldc = a.ldc, p.alpha = a.alpha, p.beta = a.beta;
  p = p.with_defaults();
  if (Status st = p.validate(); !st.is_ok()) return fail(st);
  auto bufs = RandomOperands<GemmOp>::make(ctx, p, 1, stream);
  if (!bufs.is_ok()) return fail(bufs.status());
  GemmOperands ops = (*bufs)->operands();
  fmt::print("GEMM {}({}) on {}\n", gemm_op_signature(p), gemm_params_signature(p), ctx.device().to_string());

  const DeviceRuntime* rt = ctx.registry().runtime(ctx.device().kind);
  auto timer = rt->make_timer(ops.stream);
  auto measure = [&](const char* label) -> int {
    // The seed's 10 warm-up iterations before untuned and tuned alike: the first calls load
    // libraries, start thread pools, fault in pages (and tune, on the tuned side); none of that
    // is GEMM time.
    auto t = time_calls([&] { return gemm(ctx, p, ops); }, 10, a.iters, 2.0, *timer);
    if (!t.is_ok()) return fail(t.status());
    auto hit = ctx.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
    std::string sol = ctx.config().get(Setting::kEnabled) == "1" && hit ? hit->solution : "Default";
    fmt::print("{}: {:.2f} iter/s ({:.4g}s, {} iterations, {:.1f} GFLOP/s) solution {} (warm-up {:.4g}s)\n", label,
               double(t->iters) / t->seconds, t->seconds, t->iters, p.flops() * double(t->iters) / t->seconds / 1e9,
               sol, t->warmup_seconds);
    return 0;
  };
  (void)ctx.config().set(Setting::kEnabled, false);
  if (int rc = measure("untuned"); rc) return rc;
  (void)ctx.config().set(Setting::kEnabled, true);
  if (int rc = measure("tuned"); rc) return rc;
  if (int rc = compare_interleaved(ctx, p, ops, *timer); rc) return rc;
  if (auto path = ctx.results_path(); !path.empty()) fmt::print("results file: {}\n", path);
  return report_unsaved(ctx, "bench") ? 1 : 0;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / double(v.size()));
}

int bench_suite(Context& ctx, const BenchArgs& a, void* stream) {
  if ((a.suite == "attention" || a.suite == "llm-fp8") && a.clock_trace_ms > 0)
    return fail(Status::invalid_argument("--clock-trace traces the GEMM suites (llm, cpu-llm, --suite-file)"));
  if (a.suite == "attention")
    return bench_attention_suite(ctx, {a.only, a.csv, a.results, a.shapes_csv, a.rounds}, stream);
  if (a.suite == "llm-fp8") return bench_fp8_suite(ctx, {a.only, a.csv, a.results, a.rounds}, stream);
  std::vector<SuiteShape> shapes;
  if (!a.suite_file.empty()) {
    auto s = read_suite_file(a.suite_file);
    if (!s.is_ok()) return fail(s.status());
    shapes = *s;
  } else {
    shapes = suite_shapes(a.suite);
    if (shapes.empty())
      return fail(Status::invalid_argument("unknown suite '" + a.suite + "' (cpu-llm, llm, llm-fp8, attention)"));
  }
  const std::string suite_name = a.suite_file.empty() ? "suite " + a.suite : "suite file " + a.suite_file;
  if (shapes.empty()) return fail(Status::invalid_argument(printable(suite_name) + " has no shapes"));
  if (!a.only.empty()) {
    std::vector<SuiteShape> kept;
    std::string names;
    for (auto& s : shapes) {
      if (s.name.find(a.only) != std::string::npos) kept.push_back(s);
      names += (names.empty() ? "" : ", ") + s.name;
    }
    if (kept.empty()) {
      return fail(Status::invalid_argument(fmt::format("--only {}: no shape of the {} matches (its shapes: {})",
                                                       printable(a.only), printable(suite_name), printable(names))));
    }
    shapes = kept;
  }
  if (a.clock_trace_ms > 0) return bench_clock_trace(ctx, shapes, {a.clock_trace_ms, 1000, a.csv}, stream);
  // Tune into a fresh file so that tuning time is real, unless --results names one to keep.
  const std::string temp = tune_into_results(ctx, a.results);

  auto ceil = measure_ceilings(ctx, shapes.front().p.dtype, stream);
  if (!ceil.is_ok()) return fail(ceil.status());
  std::string machine = ctx.device().kind == DeviceKind::kCpu ? cpu_validator_value() : ctx.device().to_string();
  for (const auto& [k, v] : ctx.current_validators()) machine += (k == "TUNABLEOP_VERSION" ? "" : "; " + k + "=" + v);
  fmt::print("# machine: {}\n", machine);
  fmt::print("# ceilings: copy {:.1f} GB/s (read + write), GEMM {:.1f} GFLOP/s ({} by {})\n", ceil->copy_gbs,
             ceil->gemm_gflops, ceil->gemm_shape, ceil->gemm_solution);

  std::string baseline = a.baseline;
  if (baseline.empty() && ctx.device().kind == DeviceKind::kCpu)
    baseline = fmt::format("Gemm_Openblas_t{}", cpu_core_count());
  struct Row {
    SuiteShape s;
    std::string chosen;  // what is served: the tuner's choice, or Default where the guard reverted it
    double tuning_ms = 0, def = 0, tuned = 0, best = 0, base = 0, floor = 0;
    std::string best_name;
    std::map<std::string, double> family;
    std::string tuner_chosen;  // the tuner's choice, and its time in this measurement
    double tuner_ms = 0;
    ChoiceVerdict guard;  // its paired rounds against Default here
    ResultEntry winner;   // how its final rounds ran (sustained or burst), the clock and power then
  };
  std::vector<Row> rows;
  std::set<std::string> families;
  for (const auto& s : shapes) {
    Row r;
    r.s = s;
    auto rep = OpTools<GemmOp>::tune(ctx, s.p, /*retune=*/true, stream);
    if (!rep.is_ok()) return fail(rep.status());
    r.chosen = r.tuner_chosen = rep->winner.solution;
    r.tuning_ms = rep->winner.tuning_ms;
    r.winner = rep->winner;
    bool cpu = ctx.device().kind == DeviceKind::kCpu;
    auto t = measure_candidates(ctx, s.p, a.rounds, cpu ? 40 : 5, stream);
    if (!t.is_ok()) return fail(t.status());
    for (const auto& ct : *t) {
      if (ct.median_ms <= 0) continue;
      if (ct.name == "Default") r.def = ct.median_ms;
      if (ct.name == r.chosen) r.tuned = ct.median_ms;
      if (ct.name == baseline) r.base = ct.median_ms;
      if (r.best == 0 || ct.median_ms < r.best) r.best = ct.median_ms, r.best_name = ct.name;
      const std::string& fam = ct.family;
      families.insert(fam);
      if (!r.family.count(fam) || ct.median_ms < r.family[fam]) r.family[fam] = ct.median_ms;
    }
    // The post-decision guard: a choice that loses to Default in this measurement is reverted.
    r.tuner_ms = r.tuned;
    auto verdict = guard_suite_choice(ctx, s.p, r.chosen, *t);
    if (!verdict.is_ok()) return fail(verdict.status());
    r.guard = *verdict;
    if (r.guard.loses) r.chosen = "Default", r.tuned = r.def;
    double flops_floor = ceil->gemm_gflops > 0 ? s.p.flops() / (ceil->gemm_gflops * 1e9) * 1e3 : 0;
    double bytes_floor = bytes_moved(s.p) / (ceil->copy_gbs * 1e9) * 1e3;
    r.floor = std::max(flops_floor, bytes_floor);
    std::string how = r.winner.final_rounds;
    if (r.winner.sm_mhz > 0) how += fmt::format(" {:.0f} MHz", r.winner.sm_mhz);
    if (r.guard.loses)
      how += fmt::format("; guard reverted {} ({:.3f}x Default's time)", r.tuner_chosen, r.guard.ratio);
    fmt::print(stderr, "{:<26} default {:9.4f} ms  tuned {:9.4f} ms  {:<34} tuning {:6.0f} ms  {}\n", s.name, r.def,
               r.tuned, r.chosen, r.tuning_ms, how);
    rows.push_back(std::move(r));
  }

  // Markdown table on stdout.
  std::string head =
      "| shape | m x n x k | Default ms | tuned ms | speedup | chosen | GFLOP/s | % peak | % floor | tuning s "
      "| best single | tuned/best |";
  std::string sep = "|---|---|---|---|---|---|---|---|---|---|---|---|";
  if (!baseline.empty()) head += " " + baseline + " ms |", sep += "---|";
  for (const auto& f : families) head += " best " + f + " ms |", sep += "---|";
  fmt::print("{}\n{}\n", head, sep);
  std::vector<double> speedups, vs_base;
  int worse3 = 0;
  for (const auto& r : rows) {
    double gf = r.tuned > 0 ? r.s.p.flops() / (r.tuned * 1e-3) / 1e9 : 0;
    std::string line = fmt::format(
        "| {} | {}x{}x{} | {:.4f} | {:.4f} | {:.2f}x | {} | {:.1f} | {:.0f}% | {:.0f}% | {:.2f} | {:.4f} ({}) | {:.3f} "
        "|",
        r.s.name, r.s.p.m, r.s.p.n, r.s.p.k, r.def, r.tuned, r.def / r.tuned, r.chosen, gf,
        100 * gf / std::max(ceil->gemm_gflops, 1e-9), 100 * r.floor / r.tuned, r.tuning_ms / 1e3, r.best, r.best_name,
        r.tuned / r.best);
    if (!baseline.empty()) line += r.base > 0 ? fmt::format(" {:.4f} |", r.base) : " - |";
    for (const auto& f : families) line += r.family.count(f) ? fmt::format(" {:.4f} |", r.family.at(f)) : " - |";
    fmt::print("{}\n", line);
    speedups.push_back(r.def / r.tuned);
    if (r.base > 0) vs_base.push_back(r.base / r.tuned);
    if (r.tuned > 1.03 * r.best) ++worse3;
  }
  fmt::print("\ngeomean speedup tuned vs Default: {:.3f}x over {} shapes\n", geomean(speedups), rows.size());
  if (!vs_base.empty())
    fmt::print("geomean speedup tuned vs {}: {:.3f}x over {} shapes\n", baseline, geomean(vs_base), vs_base.size());
  fmt::print("shapes where tuned is > 3% behind the best single candidate: {}\n", worse3);
  // The guard's record, and the tuner's own choices before it (what the tuner alone achieved).
  std::vector<double> as_tuned;
  std::string reverted;
  int reverts = 0, choices = 0, below = 0;
  for (const auto& r : rows) {
    const double t = r.tuner_ms > 0 ? r.tuner_ms : r.tuned;
    if (t > 0) as_tuned.push_back(r.def / t);
    if (t > 0 && r.def / t < 0.99) ++below;
    choices += r.tuner_chosen != "Default";
    if (!r.guard.loses) continue;
    ++reverts;
    reverted += fmt::format("{}{} ({}: {:.3f}x Default's time)", reverted.empty() ? "" : ", ", r.s.name, r.tuner_chosen,
                            r.guard.ratio);
  }
  fmt::print("post-decision guard: {} of {} tuned choices lost to Default in this measurement and were reverted{}{}\n",
             reverts, choices, reverts ? ": " : "", reverted);
  fmt::print("as tuned, before the guard: geomean {:.3f}x over {} shapes; shapes below 0.99x Default: {}\n",
             geomean(as_tuned), as_tuned.size(), below);

  int rc = 0;
  if (!a.csv.empty()) {
    std::string out =
        "shape,m,n,k,dtype,default_ms,tuned_ms,chosen,best_ms,best_name,baseline_ms,floor_ms,tuning_ms,tuner_chosen,"
        "tuner_ms,guard_ratio,reverted,final_rounds,sm_mhz,power_w";
    for (std::string f : families) {
      std::replace(f.begin(), f.end(), ' ', '_');
      out += ",best_" + f + "_ms";
    }
    out += "\n";
    for (const auto& r : rows) {
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", r.s.name, r.s.p.m, r.s.p.n,
                         r.s.p.k, dtype_name(r.s.p.dtype), r.def, r.tuned, r.chosen, r.best, r.best_name, r.base,
                         r.floor, r.tuning_ms, r.tuner_chosen, r.tuner_ms, r.guard.ratio, r.guard.loses ? 1 : 0,
                         r.winner.final_rounds, r.winner.sm_mhz, r.winner.power_w);
      for (const auto& f : families) out += "," + (r.family.count(f) ? fmt::format("{}", r.family.at(f)) : "");
      out += "\n";
    }
    if (Status st = replace_regular_file(a.csv, out); !st.is_ok()) {
      fmt::print(stderr, "tunableop bench: --csv {}\n", printable(st.message()));
      rc = 1;
    } else {
      fmt::print("wrote {}\n", a.csv);
    }
  }
  if (!temp.empty()) {
    remove_temp_results(temp);
  } else if (report_unsaved(ctx, "bench")) {
    rc = 1;
  }
  return rc;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand("bench", "Time a GEMM untuned vs tuned (seed Example 1), or an LLM shape suite");
  c->add_option("-m", a->m, "rows of op(A) and C (column-major)")->check(at_least(0))->capture_default_str();
  c->add_option("-n", a->n, "columns of op(B) and C")->check(at_least(0))->capture_default_str();
  c->add_option("-k", a->k, "inner dimension")->check(at_least(0))->capture_default_str();
  c->add_option("--transA", a->transa, "N or T")->check(CLI::IsMember({"N", "T", "n", "t"}))->capture_default_str();
  c->add_option("--transB", a->transb, "N or T")->check(CLI::IsMember({"N", "T", "n", "t"}))->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, fp64, bf16 or fp16")->capture_default_str();
  c->add_option("--batch", a->batch, "strided batch count")->check(at_least(1))->capture_default_str();
  c->add_option("--lda", a->lda, "leading dimension of A (default dense)")->check(at_least(0));
  c->add_option("--ldb", a->ldb, "leading dimension of B (default dense)")->check(at_least(0));
  c->add_option("--ldc", a->ldc, "leading dimension of C (default dense)")->check(at_least(0));
  c->add_option("--alpha", a->alpha)->capture_default_str();
  c->add_option("--beta", a->beta)->capture_default_str();
  c->add_option("--iters", a->iters, "timed iterations (default: about two seconds' worth)")->check(at_least(0));
  c->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  c->add_option("--gpu", a->gpu, "CUDA device ordinal")->check(at_least(0))->capture_default_str();
  c->add_option("--verbose", a->verbose, "override TUNABLEOP_VERBOSE (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--suite", a->suite,
                "run a shape suite: cpu-llm (CPU, fp32), llm (GPU, bf16), llm-fp8 (llm's shapes as ScaledGemm: e4m3, "
                "rowwise scales, bf16 out) or attention (the Attention op on the device: Llama-2-7B and Gemma-2B "
                "prefill and decode on CUDA, tiny shapes on the CPU)");
  c->add_option("--shapes-csv", a->shapes_csv, "suite attention: also write its shapes here (for sdpa_bench.py)");
  c->add_option("--suite-file", a->suite_file, "suite from a CSV file: name,dtype,transa,transb,m,n,k");
  c->add_option("--only", a->only, "suite: only shapes whose name contains this");
  c->add_option("--csv", a->csv, "suite: also write the table as CSV here");
  c->add_option("--results", a->results, "suite: tune into this results file (default: a temporary one)");
  c->add_option("--baseline", a->baseline, "suite: a candidate to compare with (CPU default: Gemm_Openblas_t<cores>)");
  c->add_option("--rounds", a->rounds, "suite: interleaved measurement rounds per shape")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_option("--clock-trace", a->clock_trace_ms,
                "suite: instead of tuning, run each shape's Default back to back for this many ms after a 1 s pause "
                "and print its time per call, SM clock and power against the length of the load (what "
                "TUNABLEOP_SUSTAINED_MIN_CALL_MS and _HEAT_MS are set from; --csv: every point)")
      ->check(CLI::Range(0.0, 600000.0));
  add_bench_serve_command(*c);
  c->callback([a, c]() {
    if (c->got_subcommand("serve")) return;  // `bench serve` ran its own
    auto dev = parse_device(a->device, a->gpu);
    if (!dev.is_ok()) std::exit(fail(dev.status()));
    Context ctx(*dev);
    if (a->verbose >= 0) (void)ctx.config().set(Setting::kVerbose, a->verbose);
    const DeviceRuntime* rt = ctx.registry().runtime(dev->kind);
    if (!rt) std::exit(fail(Status::unsupported(dev->to_string() + " is not available in this build or machine")));
    if (Status st = rt->set_device(dev->ordinal); !st.is_ok()) std::exit(fail(st));
    void* stream = rt->create_stream();
    int rc = (a->suite.empty() && a->suite_file.empty()) ? bench_single(ctx, *a, stream) : bench_suite(ctx, *a, stream);
    rt->destroy_stream(stream);
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
