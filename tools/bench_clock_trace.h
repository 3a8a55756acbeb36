// What a clock trace under sustained load says (`tunableop bench --suite ... --clock-trace MS`,
// bench_clock.cc): one problem's Default run back to back from an idle GPU, its time per call
// and the device's clock read after every chunk of calls. Header-only so that tests can feed it
// made-up traces.
#pragma once

#include <algorithm>
#include <vector>

#include "tunableop/timer.h"
#include "tunableop/tuner.h"

namespace tunableop::cli {

struct TracePoint {
  double t_ms = 0;     // since the load began, at the end of this chunk of calls
  double call_ms = 0;  // ms per call in this chunk
  DeviceClock clock;   // read right after it
};

struct TraceSummary {
  double start_call_ms = 0;   // ms per call in the first kStartMs of load (the boost clock)
  double steady_call_ms = 0;  // in the last quarter of the trace
  double slowdown = 0;        // steady / start - 1
  // When the time per call last crossed 90% of the way from start to steady: how long the load
  // must last before the rounds of a sustained timing count. 0 when it did not slow by kNoise.
  double settled_ms = 0;
  double start_mhz = 0, steady_mhz = 0, steady_w = 0;  // 0: unknown (no NVML)
  double limit_ms = -1;                                // first reading at a power or thermal limit (-1: none)
};

inline constexpr double kStartMs = 20;
inline constexpr double kNoise = 0.01;  // a slowdown smaller than this is the trace's noise

inline TraceSummary summarize_trace(const std::vector<TracePoint>& pts) {
  TraceSummary s;
  if (pts.empty()) return s;
  const double end = pts.back().t_ms;
  std::vector<double> start, steady, steady_mhz, steady_w;
  for (const auto& p : pts) {
    if (p.t_ms <= kStartMs || start.empty()) start.push_back(p.call_ms);
    if (p.t_ms >= 0.75 * end) {
      steady.push_back(p.call_ms);
      if (p.clock.sm_mhz > 0) steady_mhz.push_back(p.clock.sm_mhz);
      if (p.clock.power_w > 0) steady_w.push_back(p.clock.power_w);
    }
    if (p.clock.limited && s.limit_ms < 0) s.limit_ms = p.t_ms;
  }
  s.start_call_ms = median(start);
  s.steady_call_ms = median(steady);
  s.slowdown = s.start_call_ms > 0 ? s.steady_call_ms / s.start_call_ms - 1 : 0;
  s.start_mhz = pts.front().clock.sm_mhz;
  s.steady_mhz = median(steady_mhz);
  s.steady_w = median(steady_w);
  if (s.slowdown >= kNoise) {
    const double mark = s.start_call_ms + 0.9 * (s.steady_call_ms - s.start_call_ms);
    for (const auto& p : pts)
      if (p.call_ms < mark) s.settled_ms = p.t_ms;  // the last chunk still short of the mark
  }
  return s;
}

}  // namespace tunableop::cli
