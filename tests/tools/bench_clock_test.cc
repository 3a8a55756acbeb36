// What `bench --clock-trace` reads from a trace (tools/bench_clock_trace.h): the time per call at
// the start and at steady state, when it settled, and the clock and power, on made-up traces.
#include "bench_clock_trace.h"

#include <gtest/gtest.h>

namespace tunableop::cli {
namespace {

// 1 s of load in 5 ms chunks: 1.0 ms per call at 1980 MHz for 100 ms, a ramp to 1.15 ms (1755
// MHz, at the power cap from 150 ms on) by 200 ms, then steady.
std::vector<TracePoint> capped_trace() {
  std::vector<TracePoint> pts;
  for (double t = 5; t <= 1000; t += 5) {
    const double f = t <= 100 ? 0 : t >= 200 ? 1 : (t - 100) / 100;
    TracePoint p;
    p.t_ms = t;
    p.call_ms = 1.0 + 0.15 * f;
    p.clock = {1980 - 225 * f, 500 + 200 * f, t >= 150};
    pts.push_back(p);
  }
  return pts;
}

TEST(BenchClockTrace, StartSteadySlowdownAndWhenItSettled) {
  TraceSummary s = summarize_trace(capped_trace());
  EXPECT_DOUBLE_EQ(s.start_call_ms, 1.0);
  EXPECT_DOUBLE_EQ(s.steady_call_ms, 1.15);
  EXPECT_NEAR(s.slowdown, 0.15, 1e-12);
  // 90% of the way (1.135 ms per call) is reached at 190 ms: the last chunk short of it ended at 185.
  EXPECT_DOUBLE_EQ(s.settled_ms, 185);
  EXPECT_DOUBLE_EQ(s.start_mhz, 1980);
  EXPECT_DOUBLE_EQ(s.steady_mhz, 1755);
  EXPECT_DOUBLE_EQ(s.steady_w, 700);
  EXPECT_DOUBLE_EQ(s.limit_ms, 150);
}

TEST(BenchClockTrace, AShapeThatDoesNotSlowHasNothingToSettle) {
  std::vector<TracePoint> pts;
  for (double t = 5; t <= 500; t += 5) pts.push_back({t, t == 300 ? 0.9 : 1.0, {}});  // one fast outlier
  TraceSummary s = summarize_trace(pts);
  EXPECT_DOUBLE_EQ(s.slowdown, 0);
  EXPECT_DOUBLE_EQ(s.settled_ms, 0);
  EXPECT_DOUBLE_EQ(s.start_mhz, 0) << "no NVML: unknown";
  EXPECT_DOUBLE_EQ(s.limit_ms, -1);
  EXPECT_DOUBLE_EQ(summarize_trace({}).start_call_ms, 0);
}

}  // namespace
}  // namespace tunableop::cli
