// `tunableop bench --suite ... --clock-trace MS` (bench_clock.cc): how each shape's Default call
// slows under sustained load, and what that says for the tuner's sustained timing.
#pragma once

#include <string>
#include <vector>

#include "bench_suites.h"
#include "tunableop/context.h"

namespace tunableop::cli {

struct ClockTraceArgs {
  double trace_ms = 0;    // load per shape
  double idle_ms = 1000;  // pause before each shape, so that it starts from a cool GPU
  std::string csv;        // every trace point, when given
};

int bench_clock_trace(Context& ctx, const std::vector<SuiteShape>& shapes, const ClockTraceArgs& a, void* stream);

}  // namespace tunableop::cli
