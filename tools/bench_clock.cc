// The measurement behind the tuner's sustained timing (docs/design.md, "Sustained timing"): for
// each shape, after a pause that lets the GPU cool, its Default call runs back to back on the
// rotating input copies the tuner uses, in chunks of ~5 ms (one host wait each: the GPU idles
// microseconds between them), for the trace's length; after each chunk the time per call and
// the SM clock, power and limit (NVML) are read. The table says how much each shape slows once
// the GPU sits at its power cap and how long that takes: the smallest Default call that slows
// is what TUNABLEOP_SUSTAINED_MIN_CALL_MS should be, the longest settling time what
// TUNABLEOP_SUSTAINED_HEAT_MS should be.
#include "bench_clock.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "bench_clock_trace.h"
#include "cli_support.h"
#include "tunableop/op_tools.h"
#include "tunableop/safe_file.h"

namespace tunableop::cli {

namespace {

constexpr double kChunkMs = 5;
constexpr double kSlowsBy = 0.02;  // a shape whose Default slows by this much under load "heats"

StatusOr<std::vector<TracePoint>> trace_one(Context& ctx, const GemmParams& params, const ClockTraceArgs& a,
                                            void* stream) {
  auto bufs = RandomOperands<GemmOp>::make(ctx, params, 7, stream);
  if (!bufs.is_ok()) return bufs.status();
  const GemmParams& p = (*bufs)->params();
  auto cands = OpTools<GemmOp>::candidates(ctx, p, 0);
  cands.resize(1);  // Default alone
  auto pr_or = OpTools<GemmOp>::tuning_problem(ctx, p, (*bufs)->operands(), cands);
  if (!pr_or.is_ok()) return pr_or.status();
  TuningProblem& pr = **pr_or;
  size_t rotation = 0;
  auto one = time_runs(pr, 0, 2, &rotation);  // warm (a first call's costs), and sized
  if (!one.is_ok()) return one.status();
  const int runs = std::clamp(int(kChunkMs / std::max(*one, 1e-4)), 1, 100000);
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.idle_ms));
  std::vector<TracePoint> pts;
  Timer& t = pr.timer();
  const double t0 = t.now_ms();
  while (pts.empty() || pts.back().t_ms < a.trace_ms) {
    auto ms = time_runs(pr, 0, runs, &rotation);
    if (!ms.is_ok()) return ms.status();
    TracePoint pt;
    pt.clock = t.device_clock();
    pt.t_ms = t.now_ms() - t0;
    pt.call_ms = *ms;
    pts.push_back(pt);
  }
  return pts;
}

std::string mhz(double v) { return v > 0 ? fmt::format("{:.0f}", v) : "-"; }

}  // namespace

int bench_clock_trace(Context& ctx, const std::vector<SuiteShape>& shapes, const ClockTraceArgs& a, void* stream) {
  fmt::print(
      "# clock under sustained load: each shape's Default back to back for {:.0f} ms after {:.0f} ms idle, "
      "in ~{:.0f} ms chunks on rotating input copies; SM clock and power by NVML ('-': not available)\n",
      a.trace_ms, a.idle_ms, kChunkMs);
  fmt::print(
      "| shape | Default ms/call, first {:.0f} ms | last quarter | slowdown | settled after ms | SM MHz first "
      "| last quarter | W last quarter | limit first seen, ms |\n|---|---|---|---|---|---|---|---|---|\n",
      kStartMs);
  std::string csv = "shape,t_ms,call_ms,sm_mhz,power_w,limited\n";
  struct Seen {
    std::string name;
    TraceSummary s;
  };
  std::vector<Seen> seen;
  for (const auto& shape : shapes) {
    auto pts = trace_one(ctx, shape.p, a, stream);
    if (!pts.is_ok()) {
      fmt::print(stderr, "tunableop bench: --clock-trace {}: {}\n", shape.name, printable(pts.status().to_string()));
      return 2;
    }
    const TraceSummary s = summarize_trace(*pts);
    seen.push_back({shape.name, s});
    fmt::print("| {} | {:.4f} | {:.4f} | {:+.1f}% | {:.0f} | {} | {} | {} | {} |\n", shape.name, s.start_call_ms,
               s.steady_call_ms, 100 * s.slowdown, s.settled_ms, mhz(s.start_mhz), mhz(s.steady_mhz), mhz(s.steady_w),
               s.limit_ms < 0 ? std::string("-") : fmt::format("{:.0f}", s.limit_ms));
    for (const auto& p : *pts)
      csv += fmt::format("{},{:.3f},{:.6g},{},{},{}\n", shape.name, p.t_ms, p.call_ms, p.clock.sm_mhz, p.clock.power_w,
                         p.clock.limited ? 1 : 0);
  }
  // What the traces say for the tuner's two settings.
  const Seen *shortest_hot = nullptr, *longest_cool = nullptr, *slowest_settle = nullptr;
  for (const auto& x : seen) {
    if (x.s.slowdown >= kSlowsBy) {
      if (!shortest_hot || x.s.start_call_ms < shortest_hot->s.start_call_ms) shortest_hot = &x;
      if (!slowest_settle || x.s.settled_ms > slowest_settle->s.settled_ms) slowest_settle = &x;
    } else if (!longest_cool || x.s.start_call_ms > longest_cool->s.start_call_ms) {
      longest_cool = &x;
    }
  }
  fmt::print("\nshapes slowed by >= {:.0f}% under load: ", 100 * kSlowsBy);
  if (shortest_hot)
    fmt::print("the shortest Default call among them {:.4f} ms ({})", shortest_hot->s.start_call_ms,
               shortest_hot->name);
  else
    fmt::print("none");
  if (longest_cool)
    fmt::print("; the longest among the others {:.4f} ms ({})", longest_cool->s.start_call_ms, longest_cool->name);
  fmt::print("  -> TUNABLEOP_SUSTAINED_MIN_CALL_MS between the two (now {} ms)\n",
             ctx.options().policy.sustained_min_call_ms);
  if (slowest_settle) {
    fmt::print("the longest time to settle: {:.0f} ms ({})  -> TUNABLEOP_SUSTAINED_HEAT_MS at least that (now {} ms)\n",
               slowest_settle->s.settled_ms, slowest_settle->name, ctx.options().policy.sustained_heat_ms);
    // Settling in the last quarter, which is also what "steady" is read from, is not settled.
    if (slowest_settle->s.settled_ms > 0.75 * a.trace_ms)
      fmt::print("(that is within the trace's last quarter: the clock may still be falling; trace longer)\n");
  }
  if (!a.csv.empty()) {
    if (Status st = replace_regular_file(a.csv, csv); !st.is_ok()) {
      fmt::print(stderr, "tunableop bench: --csv {}\n", printable(st.message()));
      return 1;
    }
    fmt::print("wrote {}\n", a.csv);
  }
  return 0;
}

}  // namespace tunableop::cli
