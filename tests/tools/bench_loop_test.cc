// The timed loop of `tunableop bench` (seed Example 1): a first call that costs a second (a
// library loading, a thread pool starting, a tuning) must not be in the per-iteration number,
// untuned or tuned. A fake call on a fake clock makes that exact.
#include "bench_loop.h"

#include <gtest/gtest.h>

#include "core/fake_problem.h"

namespace tunableop::cli {
namespace {

struct FirstCallCosts {
  testing::FakeClock clock;
  int calls = 0;
  Status operator()() {
    clock.now += ++calls == 1 ? 1000.0 : 1.0;
    return Status::ok();
  }
};

TEST(BenchLoop, TheFirstCallIsWarmUpNotGemmTime) {
  FirstCallCosts f;
  testing::FakeTimer timer(f.clock, 0.0);
  auto t = time_calls([&] { return f(); }, 10, 100, 2.0, timer);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->iters, 100);
  EXPECT_DOUBLE_EQ(t->seconds, 0.1);  // 100 calls of 1 ms; the 1 s first call is not in it
  EXPECT_DOUBLE_EQ(t->warmup_seconds, 1.009);
  EXPECT_EQ(f.calls, 110);
}

TEST(BenchLoop, WithoutAnIterationCountItSizesTheLoopAfterTheWarmUp) {
  FirstCallCosts f;
  testing::FakeTimer timer(f.clock, 0.0);
  auto t = time_calls([&] { return f(); }, 10, 0, 2.0, timer);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->iters, 2000);  // 2 s of 1 ms calls, sized from calls after the warm-up
  EXPECT_DOUBLE_EQ(t->seconds, 2.0);
}

TEST(BenchLoop, AFailingCallEndsTheLoopWithItsStatus) {
  testing::FakeClock clock;
  testing::FakeTimer timer(clock, 0.0);
  int calls = 0;
  auto t = time_calls([&] { return ++calls == 15 ? Status::internal("planted failure") : Status::ok(); }, 10, 100, 2.0,
                      timer);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("planted"), std::string::npos);
  EXPECT_EQ(calls, 15);
}

}  // namespace
}  // namespace tunableop::cli
