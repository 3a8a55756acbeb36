// Context::choose / tune, op-agnostic: a fake problem with a fake clock, a real results file in a
// scratch directory. The GEMM path end to end is in tests/ops/gemm/dispatch_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu_runtime.h"
#include "tunableop/context.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;

class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("tunableop-context-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Non-validator, non-empty lines of a results file.
std::vector<std::string> entry_lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.rfind("Validator,", 0) != 0) out.push_back(line);
  return out;
}

std::vector<std::string> all_lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_text(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

class ManualTimer : public Timer {
 public:
  explicit ManualTimer(double& clock) : clock_(clock) {}
  void start() override { t0_ = clock_; }
  double stop_ms() override { return clock_ - t0_; }
  double now_ms() override { return clock_; }

 private:
  double& clock_;
  double t0_ = 0;
};

// Default (1 ms per run) and Fast (0.5 ms), or whatever costs a test needs.
class TwoWayProblem : public TuningProblem {
 public:
  explicit TwoWayProblem(std::string params = "nn_8_8_8", double default_ms = 1.0, double fast_ms = 0.5)
      : params_(std::move(params)), cost_{default_ms, fast_ms}, timer_(clock_) {}
  std::string op_signature() const override { return "GemmTunableOp_float_NN"; }
  std::string params_signature() const override { return params_; }
  size_t candidate_count() const override { return 2; }
  std::string candidate_name(size_t i) const override { return i == 0 ? "Default" : "Fast"; }
  Status supports(size_t i) override {
    return i == 0 && default_unsupported ? Status::unsupported("no") : Status::ok();
  }
  Status check_numerics(size_t) override { return Status::ok(); }
  Status run(size_t i, size_t) override {
    clock_ += cost_[i];
    return Status::ok();
  }
  size_t rotation_count() const override { return 1; }
  Timer& timer() override { return timer_; }

  bool default_unsupported = false;

 private:
  std::string params_;
  double cost_[2];
  double clock_ = 0;
  ManualTimer timer_;
};

const std::string kOp = "GemmTunableOp_float_NN";

ResultEntry entry(std::string op, std::string params, std::string solution, double ms) {
  ResultEntry e;
  e.op = std::move(op);
  e.params = std::move(params);
  e.solution = std::move(solution);
  e.time_ms = ms;
  return e;
}
const std::string kParams = "nn_8_8_8";

bool known(const std::string& name) { return name == "Default" || name == "Fast"; }

Config test_config(const ScratchDir& dir, bool enabled, bool tuning) {
  Config c = Config::defaults_only();
  EXPECT_TRUE(c.set(Setting::kEnabled, enabled).is_ok());
  EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
  EXPECT_TRUE(c.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
  EXPECT_TRUE(c.set(Setting::kUntunedFilename, dir.file("untuned%d.csv")).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 5).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
  return c;
}

struct Harness {
  explicit Harness(Config c) : ctx(Device::cpu(), std::move(c), [](Registry& r) { register_cpu_runtime(r); }) {
    ctx.log().set_sink([this](const std::string& l) { log.push_back(l); });
  }
  StatusOr<std::string> choose(const std::string& params = kParams) {
    return ctx.choose(kOp, params, known, [this, params]() -> StatusOr<std::unique_ptr<TuningProblem>> {
      ++problems_made;
      return std::unique_ptr<TuningProblem>(std::make_unique<TwoWayProblem>(params));
    });
  }
  bool logged(const std::string& what) const {
    for (const auto& l : log)
      if (l.find(what) != std::string::npos) return true;
    return false;
  }
  Context ctx;
  std::vector<std::string> log;
  int problems_made = 0;
};

TEST(Context, EnabledOffAlwaysDefaultAndNeverTunes) {
  ScratchDir dir;
  Harness h(test_config(dir, /*enabled=*/false, /*tuning=*/true));
  auto r = h.choose();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Default");
  EXPECT_EQ(h.problems_made, 0);
  EXPECT_FALSE(fs::exists(dir.file("results0.csv")));
  EXPECT_EQ(h.ctx.results().size(), 0u);
}

TEST(Context, MissWithTuningTunesOnceAndAppendsOneLine) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  auto r = h.choose();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Fast");
  EXPECT_EQ(h.problems_made, 1);
  const std::string path = dir.file("results0.csv");
  EXPECT_EQ(h.ctx.results_path(), path);
  auto lines = entry_lines(path);
  ASSERT_EQ(lines.size(), 1u) << read_text(path);
  EXPECT_EQ(lines[0].rfind(kOp + "," + kParams + ",Fast,", 0), 0u) << lines[0];
  EXPECT_EQ(all_lines(path).front().rfind("Validator,TUNABLEOP_VERSION,", 0), 0u);
  // Hit: no second tuning, no second line.
  r = h.choose();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Fast");
  EXPECT_EQ(h.problems_made, 1);
  EXPECT_EQ(entry_lines(path).size(), 1u);
  auto e = h.ctx.results().lookup(kOp, kParams);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->solution, "Fast");
  EXPECT_DOUBLE_EQ(e->time_ms, 0.5);
}

TEST(Context, NewContextServesTheFileWithoutTuning) {
  ScratchDir dir;
  {
    Harness first(test_config(dir, true, true));
    ASSERT_EQ(*first.choose(), "Fast");
  }
  Harness second(test_config(dir, true, true));
  auto r = second.choose();
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Fast");
  EXPECT_EQ(second.problems_made, 0);
  EXPECT_EQ(entry_lines(dir.file("results0.csv")).size(), 1u);
}

TEST(Context, TuningOffRecordsUntunedProblemsOnce) {
  ScratchDir dir;
  Config c = test_config(dir, true, /*tuning=*/false);
  ASSERT_TRUE(c.set(Setting::kRecordUntuned, true).is_ok());
  Harness h(std::move(c));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*h.choose(), "Default");
  EXPECT_EQ(*h.choose("nn_16_16_16"), "Default");
  EXPECT_EQ(h.problems_made, 0);
  auto lines = all_lines(dir.file("untuned0.csv"));
  ASSERT_EQ(lines.size(), 2u) << read_text(dir.file("untuned0.csv"));
  EXPECT_EQ(lines[0], kOp + "," + kParams);
  EXPECT_EQ(lines[1], kOp + ",nn_16_16_16");
  EXPECT_TRUE(entry_lines(dir.file("results0.csv")).empty());
  // A second context (another process, say) does not record them again.
  Config c2 = test_config(dir, true, false);
  ASSERT_TRUE(c2.set(Setting::kRecordUntuned, true).is_ok());
  Harness h2(std::move(c2));
  EXPECT_EQ(*h2.choose(), "Default");
  EXPECT_EQ(all_lines(dir.file("untuned0.csv")).size(), 2u);
}

TEST(Context, TuningOffWithoutRecordingWritesNothing) {
  ScratchDir dir;
  Harness h(test_config(dir, true, false));
  EXPECT_EQ(*h.choose(), "Default");
  EXPECT_FALSE(fs::exists(dir.file("untuned0.csv")));
  EXPECT_TRUE(entry_lines(dir.file("results0.csv")).empty());
}

TEST(Context, ApiTurnsTuningOnAndOffAtRunTime) {
  ScratchDir dir;
  Harness h(test_config(dir, true, false));
  EXPECT_EQ(*h.choose(), "Default");
  ASSERT_TRUE(h.ctx.config().set(Setting::kTuning, true).is_ok());
  EXPECT_EQ(*h.choose(), "Fast");
  EXPECT_EQ(h.problems_made, 1);
  ASSERT_TRUE(h.ctx.config().set(Setting::kEnabled, false).is_ok());
  EXPECT_EQ(*h.choose(), "Default");
  h.ctx.config().unset(Setting::kEnabled);  // back to the default: off
  EXPECT_EQ(*h.choose(), "Default");
  ASSERT_TRUE(h.ctx.config().set(Setting::kEnabled, true).is_ok());
  EXPECT_EQ(*h.choose(), "Fast");
  EXPECT_EQ(h.problems_made, 1);
}

TEST(Context, ForeignSolutionIsRetunedWhenTuningIsOn) {
  ScratchDir dir;
  const std::string path = dir.file("results0.csv");
  {
    Harness writer(test_config(dir, true, true));
    writer.ctx.results().insert(entry(kOp, kParams, "Gemm_Rocblas_4365", 0.01));
    ASSERT_TRUE(writer.ctx.write_results(path).is_ok());
  }
  {
    Config c = test_config(dir, true, /*tuning=*/false);
    ASSERT_TRUE(c.set(Setting::kVerbose, 1).is_ok());
    Harness off(std::move(c));
    EXPECT_EQ(*off.choose(), "Default");
    EXPECT_EQ(off.problems_made, 0);
    EXPECT_TRUE(off.logged("Gemm_Rocblas_4365"));
  }
  {
    Harness on(test_config(dir, true, true));
    EXPECT_EQ(*on.choose(), "Fast");
    EXPECT_EQ(on.problems_made, 1);
    auto lines = entry_lines(path);
    ASSERT_EQ(lines.size(), 2u) << read_text(path);
    EXPECT_NE(lines[1].find(",Fast,"), std::string::npos);
    EXPECT_EQ(*on.choose(), "Fast");
    EXPECT_EQ(on.problems_made, 1);
  }
  Harness later(test_config(dir, true, true));
  EXPECT_EQ(*later.choose(), "Fast");  // the later line wins on load
  EXPECT_EQ(later.problems_made, 0);
}

TEST(Context, ProblemThatCannotBeBuiltFallsBackToDefault) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  int calls = 0;
  auto r = h.ctx.choose(kOp, kParams, known, [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    ++calls;
    return Status::device_error("out of memory");
  });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Default");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(h.logged("out of memory"));
  EXPECT_TRUE(entry_lines(dir.file("results0.csv")).empty());
}

TEST(Context, FailedTuningFallsBackToDefault) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  auto r = h.ctx.choose(kOp, kParams, known, []() -> StatusOr<std::unique_ptr<TuningProblem>> {
    auto p = std::make_unique<TwoWayProblem>();
    p->default_unsupported = true;
    return std::unique_ptr<TuningProblem>(std::move(p));
  });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "Default");
  EXPECT_TRUE(h.logged("tuning " + kOp));
  EXPECT_FALSE(h.ctx.results().contains(kOp, kParams));
}

TEST(Context, TuneWorksRegardlessOfEnabledAndAppendsOnce) {
  ScratchDir dir;
  Harness h(test_config(dir, /*enabled=*/false, /*tuning=*/false));
  TwoWayProblem p;
  auto r = h.ctx.tune(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->winner.solution, "Fast");
  const std::string path = dir.file("results0.csv");
  EXPECT_EQ(entry_lines(path).size(), 1u);
  TwoWayProblem again;
  ASSERT_TRUE(h.ctx.tune(again).is_ok());
  EXPECT_EQ(entry_lines(path).size(), 1u) << "a stored key is not appended twice";
  TwoWayProblem forced;
  ASSERT_TRUE(h.ctx.tune(forced, /*retune=*/true).is_ok());
  EXPECT_EQ(entry_lines(path).size(), 2u);
}

TEST(Context, FilenameFollowsTheConfig) {
  ScratchDir dir;
  Config c = test_config(dir, true, true);
  ASSERT_TRUE(c.set(Setting::kFilename, dir.file("first.csv")).is_ok());  // no %d: ordinal before the extension
  Harness h(std::move(c));
  EXPECT_EQ(h.ctx.results_path(), "");  // nothing loaded yet
  EXPECT_EQ(*h.choose(), "Fast");
  EXPECT_EQ(h.ctx.results_path(), dir.file("first0.csv"));
  EXPECT_EQ(entry_lines(dir.file("first0.csv")).size(), 1u);
  ASSERT_TRUE(h.ctx.config().set(Setting::kFilename, dir.file("second%d.csv")).is_ok());
  EXPECT_EQ(*h.choose("nn_4_4_4"), "Fast");
  EXPECT_EQ(h.ctx.results_path(), dir.file("second0.csv"));
  EXPECT_EQ(entry_lines(dir.file("second0.csv")).size(), 1u);
  ASSERT_TRUE(h.ctx.load_results().is_ok());
  EXPECT_EQ(h.ctx.results_path(), dir.file("second0.csv"));
}

TEST(Context, UnreadableResultsFileIsReportedOnceAndTuningGoesOnInMemory) {
  ScratchDir dir;
  fs::create_directories(dir.file("results0.csv"));  // a directory where the file should be
  Harness h(test_config(dir, true, true));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*h.choose(), "Fast");
  EXPECT_EQ(h.problems_made, 1) << "the result is kept in memory";
  int warnings = 0;
  for (const auto& l : h.log) warnings += l.rfind("tunableop: warning: ", 0) == 0;
  EXPECT_EQ(warnings, 1) << "reported once, not on every call";
  EXPECT_EQ(h.ctx.results_path(), "");
  EXPECT_FALSE(h.ctx.load_results().is_ok()) << "an explicit reload tries again and says why it failed";
  // Pointing the config at a usable file recovers.
  ASSERT_TRUE(h.ctx.config().set(Setting::kFilename, dir.file("usable%d.csv")).is_ok());
  EXPECT_EQ(*h.choose("nn_3_3_3"), "Fast");
  EXPECT_EQ(h.ctx.results_path(), dir.file("usable0.csv"));
  EXPECT_EQ(entry_lines(dir.file("usable0.csv")).size(), 1u);
}

TEST(Context, WriteResultsWritesValidatorsAndEveryEntry) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  h.ctx.results().insert(entry(kOp, "nn_1_2_3", "Fast", 0.25));
  h.ctx.results().insert(entry(kOp, "nn_4_5_6", "Default", 0.5));
  const std::string out = dir.file("copy.csv");
  ASSERT_TRUE(h.ctx.write_results(out).is_ok());
  auto lines = all_lines(out);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("Validator,TUNABLEOP_VERSION,", 0), 0u);
  auto entries = entry_lines(out);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].rfind(kOp + ",nn_1_2_3,Fast,", 0), 0u);
  EXPECT_EQ(entries[1].rfind(kOp + ",nn_4_5_6,Default,", 0), 0u);
  EXPECT_FALSE(h.ctx.write_results(dir.file("no/such/dir/x.csv")).is_ok());
}

TEST(Context, ValidatorsComeFromTheRegistryForThisDevice) {
  Context ctx(Device::cpu(), Config::defaults_only(), [](Registry& r) {
    register_cpu_runtime(r);
    r.add_validator({"CUDA_ONLY", [] { return std::string("x"); }, DeviceKind::kCuda});
    r.add_validator({"EVERYWHERE", [] { return std::string("y"); }, DeviceKind::kCuda, /*all_devices=*/true});
  });
  Validators v = ctx.current_validators();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].first, "TUNABLEOP_VERSION");
  EXPECT_FALSE(v[0].second.empty());
  auto has = [&](const std::string& key) {
    for (const auto& [k, val] : v)
      if (k == key) return true;
    return false;
  };
  EXPECT_TRUE(has("CPU"));
  EXPECT_TRUE(has("EVERYWHERE"));
  EXPECT_FALSE(has("CUDA_ONLY"));
}

TEST(Context, OpStateIsPerTypeAndPerContext) {
  struct A {
    int value = 0;
  };
  struct B {
    int value = 0;
  };
  Context one(Device::cpu(), Config::defaults_only(), [](Registry&) {});
  Context two(Device::cpu(), Config::defaults_only(), [](Registry&) {});
  one.op_state<A>().value = 1;
  one.op_state<B>().value = 2;
  EXPECT_EQ(one.op_state<A>().value, 1);
  EXPECT_EQ(one.op_state<B>().value, 2);
  EXPECT_EQ(&one.op_state<A>(), &one.op_state<A>());
  EXPECT_EQ(two.op_state<A>().value, 0);
}

TEST(Context, ConcurrentMissesTuneOnce) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  std::vector<std::string> answers(6);
  for (size_t t = 0; t < answers.size(); ++t) {
    threads.emplace_back([&, t] {
      auto r = h.ctx.choose(kOp, kParams, known, [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
        ++made;
        return std::unique_ptr<TuningProblem>(std::make_unique<TwoWayProblem>());
      });
      answers[t] = r.is_ok() ? *r : r.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  for (const auto& a : answers) EXPECT_EQ(a, "Fast");
  EXPECT_EQ(entry_lines(dir.file("results0.csv")).size(), 1u);
}

TEST(Context, VerboseSettingReachesTheLogAtRunTime) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  EXPECT_EQ(*h.choose(), "Fast");
  EXPECT_FALSE(h.logged("finding fastest for"));  // verbose 0
  ASSERT_TRUE(h.ctx.config().set(Setting::kVerbose, 1).is_ok());
  EXPECT_EQ(*h.choose("nn_2_2_2"), "Fast");
  EXPECT_TRUE(h.logged("finding fastest for GemmTunableOp_float_NN(nn_2_2_2) out of 2 candidates"));
  EXPECT_TRUE(h.logged("└──found fastest for GemmTunableOp_float_NN(nn_2_2_2) Fast"));
}

TEST(ContextGeneration, MovesWithSettingsAndResultsOnly) {
  Context ctx(Device::cpu(), Config::defaults_only(), [](Registry& r) { register_cpu_runtime(r); });
  const uint64_t g0 = ctx.generation();
  EXPECT_EQ(ctx.generation(), g0) << "nothing changed";
  ASSERT_TRUE(ctx.config().set(Setting::kVerbose, 1).is_ok());
  const uint64_t g1 = ctx.generation();
  EXPECT_GT(g1, g0);
  ctx.results().insert(entry(kOp, kParams, "Fast", 0.5));
  const uint64_t g2 = ctx.generation();
  EXPECT_GT(g2, g1);
  ctx.results().clear();
  EXPECT_GT(ctx.generation(), g2);
}

TEST(ContextResults, LoadedOnceNotPerDecision) {
  ScratchDir dir;
  Harness h(test_config(dir, true, true));
  ASSERT_EQ(*h.choose(), "Fast");
  // The file is replaced behind the context's back with one that says otherwise: a hit is
  // served from memory, without looking at the file again.
  const std::string path = dir.file("results0.csv");
  {
    Harness other(test_config(dir, true, true));
    other.ctx.results().insert(entry(kOp, kParams, "Default", 0.9));
    ASSERT_TRUE(other.ctx.write_results(path + ".new").is_ok());
  }
  fs::rename(path + ".new", path);
  EXPECT_EQ(*h.choose(), "Fast");
  // An explicit refresh notices the replaced file and reloads it.
  ASSERT_TRUE(h.ctx.refresh_results().is_ok());
  EXPECT_EQ(*h.choose(), "Default");
  EXPECT_EQ(h.problems_made, 1);
}

TEST(ContextResults, RefreshPicksUpWhatAnotherProcessAppended) {
  ScratchDir dir;
  Harness reader(test_config(dir, true, true));
  ASSERT_TRUE(reader.ctx.load_results().is_ok());
  const uint64_t before = reader.ctx.generation();
  ASSERT_TRUE(reader.ctx.refresh_results().is_ok());
  EXPECT_EQ(reader.ctx.generation(), before) << "nothing new: nothing changes";
  {
    Harness writer(test_config(dir, true, true));
    ASSERT_EQ(*writer.choose("nn_4_4_4"), "Fast");
  }
  EXPECT_FALSE(reader.ctx.results().contains(kOp, "nn_4_4_4"));
  ASSERT_TRUE(reader.ctx.refresh_results().is_ok());
  EXPECT_TRUE(reader.ctx.results().contains(kOp, "nn_4_4_4"));
  EXPECT_GT(reader.ctx.generation(), before);
}

TEST(ContextResults, AMissLooksAtTheFileBeforeTuning) {
  ScratchDir dir;
  Harness second(test_config(dir, true, true));
  ASSERT_TRUE(second.ctx.load_results().is_ok());  // loaded before the first process tuned
  {
    Harness first(test_config(dir, true, true));
    ASSERT_EQ(*first.choose(), "Fast");
  }
  EXPECT_EQ(*second.choose(), "Fast");
  EXPECT_EQ(second.problems_made, 0) << "tuned by the other process: picked up, not tuned again";
  EXPECT_EQ(entry_lines(dir.file("results0.csv")).size(), 1u);
}

}  // namespace
}  // namespace tunableop
