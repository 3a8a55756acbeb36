// The op framework on a toy op (toy_op.h): tuning through the shared tuning problem, the plain
// call and plans, revalidation when settings or results change, fallback to Default.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ops/framework/toy_candidates.h"
#include "ops/framework/toy_op.h"

namespace tunableop::toy {
namespace {

namespace fs = std::filesystem;

class OpFrameworkTest : public ::testing::Test {
 protected:
  OpFrameworkTest() {
    dir_ = fs::temp_directory_path() / ("tunableop-op-framework-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
  }
  ~OpFrameworkTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::unique_ptr<Context> context(std::vector<std::string> names, bool enabled = true, bool tuning = true) {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, enabled).is_ok());
    EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, (dir_ / "results%d.csv").string()).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kVerbose, 2).is_ok());
    auto ctx = std::make_unique<Context>(Device::cpu(), std::move(c), backend_.registrar(std::move(names)));
    ctx->log().set_sink([this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ += l + "\n";
    });
    return ctx;
  }
  std::vector<std::string> result_lines() {
    std::ifstream in(dir_ / "results0.csv");
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l.rfind("Validator,", 0) != 0) out.push_back(l);
    return out;
  }
  // Runs y = alpha x on fresh data and checks y.
  void scale_and_check(const std::function<Status(const ScaleOperands&)>& call, double alpha = 2.0) {
    std::vector<float> x(100), y(100, -7.f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 3.f;
    Status st = call(ScaleOperands{x.data(), y.data()});
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], float(alpha * x[i])) << i;
  }
  bool logged(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    return log_.find(what) != std::string::npos;
  }

  fs::path dir_;
  ToyBackend backend_;
  std::mutex mu_;
  std::string log_;
  const ScaleParams p_{DType::kF32, 100, 2.0};
};

TEST_F(OpFrameworkTest, TunesThroughTheSharedProblemAndServesTheWinner) {
  auto ctx = context({"Default", "Scale_Wrong", "Scale_Lazy", "Scale_Fast"});
  scale_and_check([&](const ScaleOperands& o) { return scale(*ctx, p_, o); });
  auto lines = result_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("ScaleTunableOp_float,n_100,Scale_Fast,", 0), 0u) << lines[0];
  EXPECT_TRUE(logged("├──verify numerics failed id=1")) << "wrong: off by one element";
  EXPECT_TRUE(logged("├──verify numerics failed id=2")) << "lazy: y left poisoned";
  EXPECT_TRUE(logged("rotating copies")) << log_;
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return scale(*ctx, p_, o); });
  EXPECT_EQ(backend_.calls("Scale_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0);
}

TEST_F(OpFrameworkTest, APlanRunsTheChosenCandidateEveryTime) {
  auto ctx = context({"Default", "Scale_Fast"});
  auto plan = ctx->plan(p_);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(plan->solution(), "") << "nothing decided before the first run";
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(plan->solution(), "Scale_Fast");
  backend_.reset();
  for (int i = 0; i < 10; ++i) scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(backend_.calls("Scale_Fast"), 10);
  EXPECT_EQ(result_lines().size(), 1u);
  // A plan and the plain call share the problem's slot: no second tuning.
  scale_and_check([&](const ScaleOperands& o) { return scale(*ctx, p_, o); });
  EXPECT_EQ(result_lines().size(), 1u);
}

TEST_F(OpFrameworkTest, PlansRevalidateWhenSettingsChange) {
  auto ctx = context({"Default", "Scale_Fast"});
  auto plan = ctx->plan(p_);
  ASSERT_TRUE(plan.is_ok());
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  ASSERT_TRUE(ctx->config().set(Setting::kEnabled, false).is_ok());
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(backend_.calls("Default"), 1);
  EXPECT_EQ(plan->solution(), "Default");
  ASSERT_TRUE(ctx->config().set(Setting::kEnabled, true).is_ok());
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(backend_.calls("Scale_Fast"), 1) << "back to the stored result, without tuning again";
  EXPECT_EQ(backend_.calls("Default"), 0);
}

TEST_F(OpFrameworkTest, PlansRevalidateWhenResultsChange) {
  auto ctx = context({"Default", "Scale_Fast"}, true, /*tuning=*/false);
  auto plan = ctx->plan(p_);
  ASSERT_TRUE(plan.is_ok());
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(plan->solution(), "Default");
  ResultEntry e;
  e.op = "ScaleTunableOp_float";
  e.params = "n_100";
  e.solution = "Scale_Fast";
  e.time_ms = 0.2;
  ctx->results().insert(e);
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(plan->solution(), "Scale_Fast");
}

TEST_F(OpFrameworkTest, FailingChoiceFallsBackToDefaultForThatCall) {
  auto ctx = context({"Default", "Scale_Flaky"});
  auto plan = ctx->plan(p_);
  ASSERT_TRUE(plan.is_ok());
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  ASSERT_EQ(plan->solution(), "Scale_Flaky");
  backend_.flaky_fails = true;
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(backend_.calls("Scale_Flaky"), 1);
  EXPECT_EQ(backend_.calls("Default"), 1);
  EXPECT_TRUE(logged("Scale_Flaky failed (Scale_Flaky lost its device); running Default")) << log_;
}

TEST_F(OpFrameworkTest, BadInputIsRefusedWithAMessage) {
  auto ctx = context({"Default"});
  auto bad = ctx->plan(ScaleParams{DType::kF32, -1, 1.0});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("n must be >= 0"), std::string::npos);
  auto plan = ctx->plan(p_);
  ASSERT_TRUE(plan.is_ok());
  std::vector<float> x(100);
  EXPECT_EQ(plan->run(ScaleOperands{x.data(), nullptr}).code(), StatusCode::kInvalidArgument);
  auto empty = ctx->plan(ScaleParams{DType::kF32, 0, 1.0});
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->run(ScaleOperands{}).is_ok()) << "an empty problem has nothing to do";
  EXPECT_FALSE(Plan<ScaleOp>().run(ScaleOperands{x.data(), x.data()}).is_ok()) << "a default-made plan";
}

TEST_F(OpFrameworkTest, NoDefaultIsAClearError) {
  auto ctx = context({});
  std::vector<float> x(100), y(100);
  Status st = scale(*ctx, p_, ScaleOperands{x.data(), y.data()});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("no Default Scale supports ScaleTunableOp_float(n_100)"), std::string::npos)
      << st.message();
}

TEST_F(OpFrameworkTest, ConcurrentPlansOfOneProblemTuneOnce) {
  auto ctx = context({"Default", "Scale_Fast"});
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      auto plan = ctx->plan(p_);
      std::vector<double> x(100, 1.0), y(100);
      ScaleParams p = p_;
      p.dtype = DType::kF64;
      auto plan64 = ctx->plan(p);
      for (int i = 0; i < 20; ++i) {
        if (!plan->run(ScaleOperands{x.data(), y.data()}).is_ok()) ++failures;  // fp32 view of the bytes
        if (!plan64->run(ScaleOperands{x.data(), y.data()}).is_ok()) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(result_lines().size(), 2u) << "one line per problem (fp32, fp64)";
}

// --- How a plan decides: the source of each decision, the caller's hooks, preparing, capturing.

TEST_F(OpFrameworkTest, APlanSaysWhyItRunsWhatItRuns) {
  std::vector<float> x(100, 1.f), y(100);
  const ScaleOperands o{x.data(), y.data()};
  auto source = [&](Context& ctx) {
    auto d = ctx.plan(p_)->decide(o);
    EXPECT_TRUE(d.is_ok()) << d.status().to_string();
    return d.is_ok() && *d ? (*d)->source : ChoiceSource::kTuningFailed;
  };
  EXPECT_EQ(source(*context({"Default", "Scale_Fast"}, /*enabled=*/false)), ChoiceSource::kDisabled);
  EXPECT_EQ(source(*context({"Default", "Scale_Fast"}, true, /*tuning=*/false)), ChoiceSource::kNotTuned);
  auto tuning = context({"Default", "Scale_Fast"});
  EXPECT_EQ(source(*tuning), ChoiceSource::kTuned);
  EXPECT_EQ(source(*context({"Default", "Scale_Fast"}, true, false)), ChoiceSource::kStored) << "read back";
  auto plan = tuning->plan(p_);
  auto d = plan->decide(o);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ((*d)->solution, "Scale_Fast");
  EXPECT_EQ((*d)->candidate->name, "Scale_Fast");
  EXPECT_EQ((*d)->fallback->name, "Default");
}

TEST_F(OpFrameworkTest, TheCallersDefaultStandsInWhileTuning) {
  auto ctx = context({"Default", "Scale_Fast"});
  int stand_in = 0, wrapped = 0;
  PlanHooks<ScaleOp> hooks;
  hooks.default_run = [&](const ScaleParams& p, const ScaleOperands& o) {
    ++stand_in;
    for (int64_t i = 0; i < p.n; ++i) static_cast<float*>(o.y)[i] = float(p.alpha) * static_cast<const float*>(o.x)[i];
    return Status::ok();
  };
  hooks.wrap_problem = [&](std::unique_ptr<TuningProblem> pr) {
    ++wrapped;
    return pr;
  };
  std::vector<float> x(100, 1.f), y(100);
  auto d = ctx->plan(p_)->decide(ScaleOperands{x.data(), y.data()}, hooks);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_GT(stand_in, 0) << "Default was timed and checked as the caller runs it";
  EXPECT_EQ(backend_.calls("Default"), 0) << "the registered Default never stood in";
  EXPECT_EQ(wrapped, 1);
  // A stand-in that fails leaves the registered Default in its place.
  auto other = context({"Default", "Scale_Fast"});
  hooks.default_run = [&](const ScaleParams&, const ScaleOperands&) { return Status::device_error("replay refused"); };
  ScaleParams q = p_;
  q.n = 64;
  d = other->plan(q)->decide(ScaleOperands{x.data(), y.data()}, hooks);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_GT(backend_.calls("Default"), 0);
}

TEST_F(OpFrameworkTest, APreparedPlanTunedOnRandomOperandsAndRunsWithoutTuning) {
  auto ctx = context({"Default", "Scale_Fast"});
  auto plan = ctx->plan(p_);
  auto d = plan->prepare();
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ((*d)->solution, "Scale_Fast");
  EXPECT_EQ((*d)->source, ChoiceSource::kTuned);
  EXPECT_EQ(result_lines().size(), 1u);
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(backend_.calls("Scale_Fast"), 1);
  EXPECT_EQ(backend_.calls("Default"), 0) << "no tuning at the first run";
}

TEST_F(OpFrameworkTest, WhileCapturingAPlanDecidesFromResultsOnlyAndTunesLater) {
  auto ctx = context({"Default", "Scale_Fast"});
  backend_.capturing = true;
  auto plan = ctx->plan(p_);
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(plan->solution(), "Default");
  EXPECT_EQ(backend_.calls("Scale_Fast"), 0) << "nothing tuned while capturing";
  EXPECT_TRUE(result_lines().empty());
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });  // still capturing: still Default
  EXPECT_TRUE(result_lines().empty());
  // Another problem decided outside a capture tunes the deferred one first (on random operands).
  backend_.capturing = false;
  ScaleParams other = p_;
  other.n = 50;
  std::vector<float> x(50, 1.f), y(50);
  ASSERT_TRUE(scale(*ctx, other, ScaleOperands{x.data(), y.data()}).is_ok());
  EXPECT_EQ(result_lines().size(), 2u);
  EXPECT_EQ(result_lines()[0].rfind("ScaleTunableOp_float,n_100,Scale_Fast,", 0), 0u) << result_lines()[0];
  backend_.reset();
  scale_and_check([&](const ScaleOperands& o) { return plan->run(o); });
  EXPECT_EQ(plan->solution(), "Scale_Fast");
  EXPECT_EQ(backend_.calls("Scale_Fast"), 1);
}

// "How to add an op" (docs/design.md), step 5: a new op gets what tunableop/op_tools.h lends
// tools (random operands, candidate lists, its tuning problem, offline tuning) with nothing
// written for it but its definition.
TEST_F(OpFrameworkTest, ANewOpGetsTheToolsOfOpToolsH) {
  auto ctx = context({"Default", "Scale_Wrong", "Scale_Fast"});
  auto random = RandomOperands<ScaleOp>::make(*ctx, p_, 3);
  ASSERT_TRUE(random.is_ok()) << random.status().to_string();
  const float* x = static_cast<const float*>((*random)->operands().x);
  EXPECT_TRUE(std::any_of(x, x + p_.n, [](float v) { return v != 0.f; })) << "random, not zeros";
  auto cands = OpTools<ScaleOp>::candidates(*ctx, p_, 1);
  ASSERT_EQ(cands.size(), 3u);
  EXPECT_EQ(cands.front().name, "Default");
  auto problem = OpTools<ScaleOp>::tuning_problem(*ctx, p_, (*random)->operands(), cands);
  ASSERT_TRUE(problem.is_ok()) << problem.status().to_string();
  EXPECT_EQ((*problem)->op_signature(), "ScaleTunableOp_float");
  EXPECT_TRUE((*problem)->check_numerics(1).code() == StatusCode::kNumericsMismatch) << "Scale_Wrong is caught";
  auto report = OpTools<ScaleOp>::tune(*ctx, p_);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->winner.solution, "Scale_Fast");
  EXPECT_EQ(result_lines().size(), 1u);
}

}  // namespace
}  // namespace tunableop::toy
