// The timed loop of seed Example 1 (`tunableop bench` on one GEMM), untuned and tuned alike:
// warm-up calls first, so that what a first call costs (loading a BLAS library, starting its
// thread pool, page faults on fresh buffers, tuning a miss) never counts as GEMM time, then one
// timed stretch of calls. Header-only so that tests can drive it with a fake call and clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "tunableop/status.h"
#include "tunableop/timer.h"

namespace tunableop::cli {

struct LoopTiming {
  int64_t iters = 0;
  double seconds = 0;  // the timed iterations only
  double warmup_seconds = 0;
};

// `warmup` calls; then `iters` timed calls, or when iters <= 0 about `target_s` seconds' worth
// (sized from 3 timed calls after the warm-up, at least 10 and at most 100000).
inline StatusOr<LoopTiming> time_calls(const std::function<Status()>& call, int warmup, int64_t iters, double target_s,
                                       Timer& timer) {
  LoopTiming t;
  auto stretch = [&](int64_t n) -> StatusOr<double> {
    timer.start();
    for (int64_t i = 0; i < n; ++i) {
      Status st = call();
      if (!st.is_ok()) {
        (void)timer.stop_ms();
        return st;
      }
    }
    return timer.stop_ms() * 1e-3;
  };
  auto w = stretch(warmup);
  if (!w.is_ok()) return w.status();
  t.warmup_seconds = *w;
  if (iters <= 0) {
    auto three = stretch(3);
    if (!three.is_ok()) return three.status();
    iters = std::clamp<int64_t>(int64_t(target_s / std::max(*three / 3, 1e-7)), 10, 100000);
  }
  auto s = stretch(iters);
  if (!s.is_ok()) return s.status();
  t.iters = iters;
  t.seconds = *s;
  return t;
}

}  // namespace tunableop::cli
