// Config: defaults, environment precedence (TUNABLEOP_* > PYTORCH_TUNABLEOP_* > default), the API
// overriding the environment both ways, validation, and the snapshot the tuner consumes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tunableop/config.h"

namespace tunableop {
namespace {

// Every TUNABLEOP_* / PYTORCH_TUNABLEOP_* variable of a known setting is cleared for the test and
// restored afterwards, so that the machine's environment cannot leak into the expectations.
class ConfigEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& info : all_settings()) {
      for (std::string prefix : {"TUNABLEOP_", "PYTORCH_TUNABLEOP_"}) {
        std::string var = prefix + std::string(info.name);
        const char* v = std::getenv(var.c_str());
        saved_[var] = v ? std::optional<std::string>(v) : std::nullopt;
        ::unsetenv(var.c_str());
      }
    }
  }
  void TearDown() override {
    for (const auto& [var, value] : saved_) {
      if (value)
        ::setenv(var.c_str(), value->c_str(), 1);
      else
        ::unsetenv(var.c_str());
    }
  }
  static void set_env(const std::string& var, const std::string& value) { ::setenv(var.c_str(), value.c_str(), 1); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// A valid value different from the default, for every setting (the test below fails when a new
// setting is added without an entry here).
const std::map<Setting, std::pair<std::string, std::string>>& other_values() {
  // setting -> (value passed to set(), value get() returns)
  static const std::map<Setting, std::pair<std::string, std::string>> m = {
      {Setting::kEnabled, {"true", "1"}},
      {Setting::kTuning, {"off", "0"}},
      {Setting::kVerbose, {"3", "3"}},
      {Setting::kFilename, {"/tmp/x_%d.csv", "/tmp/x_%d.csv"}},
      {Setting::kNumericalCheck, {"no", "0"}},
      {Setting::kMaxTuningDurationMs, {"12.5", "12.5"}},
      {Setting::kMaxTuningIterations, {"7", "7"}},
      {Setting::kMaxWarmupDurationMs, {"0", "0"}},
      {Setting::kMaxWarmupIterations, {"2", "2"}},
      {Setting::kRotatingBufferSize, {"0", "0"}},
      {Setting::kRecordUntuned, {"yes", "1"}},
      {Setting::kUntunedFilename, {"u.csv", "u.csv"}},
      {Setting::kSearchEffort, {"2", "2"}},
      {Setting::kMinImprovement, {"0.1", "0.1"}},
      {Setting::kScreenRatio1, {"3", "3"}},
      {Setting::kScreenRatio2, {"1.25", "1.25"}},
      {Setting::kMaxProblemDurationMs, {"500", "500"}},
      {Setting::kAllowTf32, {"1", "1"}},
      {Setting::kSustainedMinCallMs, {"0.5", "0.5"}},
      {Setting::kSustainedHeatMs, {"100", "100"}},
  };
  return m;
}

TEST_F(ConfigEnvTest, DefaultsMatchOptionsAndPolicyDefaults) {
  Config c = Config::defaults_only();
  for (const auto& info : all_settings()) {
    EXPECT_EQ(c.get(info.setting), std::string(info.default_value)) << info.name;
    EXPECT_EQ(c.source(info.setting), "default") << info.name;
  }
  Options o = c.snapshot();
  Options d;
  EXPECT_FALSE(o.enabled);
  EXPECT_TRUE(o.tuning);
  EXPECT_EQ(o.verbose, 0);
  EXPECT_EQ(o.filename, "tunableop_results%d.csv");
  EXPECT_FALSE(o.record_untuned);
  EXPECT_EQ(o.untuned_filename, "tunableop_untuned%d.csv");
  EXPECT_EQ(o.filename, d.filename);
  EXPECT_EQ(o.untuned_filename, d.untuned_filename);
  // The issue's defaults: 30 ms / 100 iterations, numerics on, 2% margin.
  EXPECT_EQ(o.policy.max_tuning_ms, 30);
  EXPECT_EQ(o.policy.max_tuning_iters, 100);
  EXPECT_EQ(o.policy.max_warmup_ms, 30);
  EXPECT_EQ(o.policy.max_warmup_iters, 100);
  EXPECT_TRUE(o.policy.numerical_check);
  EXPECT_DOUBLE_EQ(o.policy.min_improvement, 0.02);
  EXPECT_DOUBLE_EQ(o.policy.screen_ratio_1, 1.5);
  EXPECT_DOUBLE_EQ(o.policy.screen_ratio_2, 1.15);
  EXPECT_EQ(o.policy.search_effort, 1);
  EXPECT_EQ(o.policy.rotating_buffer_mib, -1);
  EXPECT_FALSE(o.policy.allow_tf32);
  // The snapshot of an untouched config is exactly the policy's own defaults.
  EXPECT_EQ(o.policy.max_tuning_ms, d.policy.max_tuning_ms);
  EXPECT_EQ(o.policy.max_problem_ms, d.policy.max_problem_ms);
  EXPECT_EQ(o.policy.rotating_buffer_mib, d.policy.rotating_buffer_mib);
  EXPECT_DOUBLE_EQ(o.policy.sustained_min_call_ms, d.policy.sustained_min_call_ms);
  EXPECT_DOUBLE_EQ(o.policy.sustained_heat_ms, d.policy.sustained_heat_ms);
  EXPECT_TRUE(c.warnings().empty());
}

TEST_F(ConfigEnvTest, EveryIssueVariableIsASetting) {
  for (const char* name : {"ENABLED", "TUNING", "VERBOSE", "FILENAME", "NUMERICAL_CHECK", "MAX_TUNING_DURATION_MS",
                           "MAX_TUNING_ITERATIONS", "MAX_WARMUP_DURATION_MS", "MAX_WARMUP_ITERATIONS",
                           "ROTATING_BUFFER_SIZE", "RECORD_UNTUNED", "UNTUNED_FILENAME", "SEARCH_EFFORT"}) {
    EXPECT_TRUE(setting_from_name(name).has_value()) << name;
  }
}

TEST_F(ConfigEnvTest, SettingFromNameAcceptsBothPrefixesAndAnyCase) {
  EXPECT_EQ(setting_from_name("TUNING"), Setting::kTuning);
  EXPECT_EQ(setting_from_name("TUNABLEOP_TUNING"), Setting::kTuning);
  EXPECT_EQ(setting_from_name("PYTORCH_TUNABLEOP_TUNING"), Setting::kTuning);
  EXPECT_EQ(setting_from_name("max_tuning_iterations"), Setting::kMaxTuningIterations);
  EXPECT_FALSE(setting_from_name("NOT_A_SETTING").has_value());
  EXPECT_FALSE(setting_from_name("").has_value());
  for (const auto& info : all_settings()) {
    EXPECT_EQ(setting_from_name(info.name), info.setting) << info.name;
    EXPECT_EQ(setting_from_name("TUNABLEOP_" + std::string(info.name)), info.setting) << info.name;
  }
}

TEST_F(ConfigEnvTest, PytorchPrefixBeatsDefault) {
  set_env("PYTORCH_TUNABLEOP_VERBOSE", "2");
  set_env("PYTORCH_TUNABLEOP_ENABLED", "1");
  Config c;
  EXPECT_EQ(c.get(Setting::kVerbose), "2");
  EXPECT_EQ(c.source(Setting::kVerbose), "PYTORCH_TUNABLEOP_VERBOSE");
  EXPECT_TRUE(c.snapshot().enabled);
  EXPECT_EQ(c.snapshot().verbose, 2);
  EXPECT_EQ(c.source(Setting::kTuning), "default");
}

TEST_F(ConfigEnvTest, TunableopPrefixBeatsPytorchPrefix) {
  set_env("PYTORCH_TUNABLEOP_VERBOSE", "2");
  set_env("TUNABLEOP_VERBOSE", "3");
  set_env("PYTORCH_TUNABLEOP_TUNING", "1");
  set_env("TUNABLEOP_TUNING", "0");
  set_env("PYTORCH_TUNABLEOP_FILENAME", "pt_%d.csv");
  set_env("TUNABLEOP_FILENAME", "ours_%d.csv");
  Config c;
  EXPECT_EQ(c.get(Setting::kVerbose), "3");
  EXPECT_EQ(c.source(Setting::kVerbose), "TUNABLEOP_VERBOSE");
  EXPECT_EQ(c.get(Setting::kTuning), "0");
  EXPECT_EQ(c.get(Setting::kFilename), "ours_%d.csv");
  EXPECT_TRUE(c.warnings().empty());
}

TEST_F(ConfigEnvTest, DefaultsOnlyIgnoresTheEnvironment) {
  set_env("TUNABLEOP_ENABLED", "1");
  set_env("PYTORCH_TUNABLEOP_VERBOSE", "3");
  Config c = Config::defaults_only();
  EXPECT_EQ(c.get(Setting::kEnabled), "0");
  EXPECT_EQ(c.get(Setting::kVerbose), "0");
}

TEST_F(ConfigEnvTest, EnvironmentIsReadOnceAtConstruction) {
  set_env("TUNABLEOP_VERBOSE", "1");
  Config c;
  set_env("TUNABLEOP_VERBOSE", "3");
  EXPECT_EQ(c.get(Setting::kVerbose), "1");
}

TEST_F(ConfigEnvTest, ApiBeatsEnvironmentBothWaysAndUnsetRestoresIt) {
  set_env("TUNABLEOP_ENABLED", "1");
  set_env("PYTORCH_TUNABLEOP_TUNING", "0");
  Config c;
  ASSERT_TRUE(c.snapshot().enabled);
  ASSERT_FALSE(c.snapshot().tuning);

  // env says 1, API says 0
  ASSERT_TRUE(c.set(Setting::kEnabled, false).is_ok());
  EXPECT_FALSE(c.snapshot().enabled);
  EXPECT_EQ(c.source(Setting::kEnabled), "api");
  // env says 0, API says 1
  ASSERT_TRUE(c.set(Setting::kTuning, true).is_ok());
  EXPECT_TRUE(c.snapshot().tuning);
  EXPECT_EQ(c.source(Setting::kTuning), "api");

  c.unset(Setting::kEnabled);
  EXPECT_TRUE(c.snapshot().enabled);
  EXPECT_EQ(c.source(Setting::kEnabled), "TUNABLEOP_ENABLED");
  c.unset(Setting::kTuning);
  EXPECT_FALSE(c.snapshot().tuning);
  EXPECT_EQ(c.source(Setting::kTuning), "PYTORCH_TUNABLEOP_TUNING");

  // Unsetting something never set is harmless; unset_all drops every API value.
  c.unset(Setting::kVerbose);
  ASSERT_TRUE(c.set(Setting::kEnabled, false).is_ok());
  ASSERT_TRUE(c.set(Setting::kVerbose, 2).is_ok());
  c.unset_all();
  EXPECT_TRUE(c.snapshot().enabled);
  EXPECT_EQ(c.get(Setting::kVerbose), "0");
  EXPECT_EQ(c.source(Setting::kVerbose), "default");
}

TEST_F(ConfigEnvTest, BadEnvironmentValueWarnsAndIsIgnored) {
  set_env("TUNABLEOP_VERBOSE", "loud");
  set_env("TUNABLEOP_MAX_TUNING_ITERATIONS", "0");  // below the minimum of 1
  set_env("PYTORCH_TUNABLEOP_ENABLED", "maybe");
  set_env("TUNABLEOP_MIN_IMPROVEMENT", "nan");
  // A bad TUNABLEOP_ value leaves a good PYTORCH_ value in force.
  set_env("PYTORCH_TUNABLEOP_SEARCH_EFFORT", "2");
  set_env("TUNABLEOP_SEARCH_EFFORT", "9");
  Config c;
  auto w = c.warnings();
  ASSERT_EQ(w.size(), 5u);
  auto mentions = [&](const std::string& what) {
    for (const auto& line : w)
      if (line.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(mentions("TUNABLEOP_VERBOSE=loud"));
  EXPECT_TRUE(mentions("TUNABLEOP_MAX_TUNING_ITERATIONS=0"));
  EXPECT_TRUE(mentions("PYTORCH_TUNABLEOP_ENABLED=maybe"));
  EXPECT_TRUE(mentions("TUNABLEOP_MIN_IMPROVEMENT=nan"));
  EXPECT_TRUE(mentions("TUNABLEOP_SEARCH_EFFORT=9"));
  EXPECT_EQ(c.get(Setting::kVerbose), "0");
  EXPECT_EQ(c.get(Setting::kMaxTuningIterations), "100");
  EXPECT_EQ(c.get(Setting::kEnabled), "0");
  EXPECT_EQ(c.get(Setting::kMinImprovement), "0.02");
  EXPECT_EQ(c.get(Setting::kSearchEffort), "2");
  EXPECT_EQ(c.source(Setting::kSearchEffort), "PYTORCH_TUNABLEOP_SEARCH_EFFORT");
  // The snapshot of such a config is still usable.
  EXPECT_EQ(c.snapshot().policy.max_tuning_iters, 100);
}

TEST_F(ConfigEnvTest, BadApiValueIsInvalidArgumentNamingTheSetting) {
  Config c = Config::defaults_only();
  struct Case {
    Setting s;
    std::string value;
    std::string name;
  };
  const Case cases[] = {
      {Setting::kEnabled, "maybe", "TUNABLEOP_ENABLED"},
      {Setting::kVerbose, "4", "TUNABLEOP_VERBOSE"},
      {Setting::kVerbose, "-1", "TUNABLEOP_VERBOSE"},
      {Setting::kVerbose, "1.5", "TUNABLEOP_VERBOSE"},
      {Setting::kMaxTuningIterations, "0", "TUNABLEOP_MAX_TUNING_ITERATIONS"},
      {Setting::kMaxTuningIterations, "10x", "TUNABLEOP_MAX_TUNING_ITERATIONS"},
      {Setting::kMaxTuningDurationMs, "-5", "TUNABLEOP_MAX_TUNING_DURATION_MS"},
      {Setting::kMaxTuningDurationMs, "", "TUNABLEOP_MAX_TUNING_DURATION_MS"},
      {Setting::kRotatingBufferSize, "-2", "TUNABLEOP_ROTATING_BUFFER_SIZE"},
      {Setting::kSearchEffort, "3", "TUNABLEOP_SEARCH_EFFORT"},
      {Setting::kMinImprovement, "nan", "TUNABLEOP_MIN_IMPROVEMENT"},
      {Setting::kMinImprovement, "1.5", "TUNABLEOP_MIN_IMPROVEMENT"},
      {Setting::kScreenRatio1, "0.5", "TUNABLEOP_SCREEN_RATIO_1"},
      {Setting::kScreenRatio2, "inf", "TUNABLEOP_SCREEN_RATIO_2"},
      {Setting::kMaxProblemDurationMs, "0", "TUNABLEOP_MAX_PROBLEM_DURATION_MS"},
      {Setting::kSustainedMinCallMs, "-0.1", "TUNABLEOP_SUSTAINED_MIN_CALL_MS"},
      {Setting::kSustainedHeatMs, "1e9", "TUNABLEOP_SUSTAINED_HEAT_MS"},
      {Setting::kFilename, "", "TUNABLEOP_FILENAME"},
      {Setting::kUntunedFilename, "", "TUNABLEOP_UNTUNED_FILENAME"},
  };
  for (const auto& tc : cases) {
    std::string before = c.get(tc.s);
    Status st = c.set(tc.s, tc.value);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << tc.name << "='" << tc.value << "'";
    EXPECT_NE(st.message().find(tc.name), std::string::npos) << st.message();
    EXPECT_EQ(c.get(tc.s), before) << "a rejected value must not change " << tc.name;
    EXPECT_EQ(c.source(tc.s), "default");
  }
  // Typed overloads are validated the same way.
  EXPECT_EQ(c.set(Setting::kVerbose, 9).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.set(Setting::kMinImprovement, -0.5).code(), StatusCode::kInvalidArgument);
}

TEST_F(ConfigEnvTest, EverySettingCanBeSetAndUnsetThroughTheApi) {
  ASSERT_EQ(other_values().size(), all_settings().size()) << "add the new setting to other_values()";
  Config c = Config::defaults_only();
  for (const auto& info : all_settings()) {
    auto it = other_values().find(info.setting);
    ASSERT_NE(it, other_values().end()) << info.name;
    const auto& [in, out] = it->second;
    ASSERT_NE(out, std::string(info.default_value)) << info.name;
    Status st = c.set(info.setting, in);
    ASSERT_TRUE(st.is_ok()) << info.name << ": " << st.to_string();
    EXPECT_EQ(c.get(info.setting), out) << info.name;
    EXPECT_EQ(c.source(info.setting), "api") << info.name;
    c.unset(info.setting);
    EXPECT_EQ(c.get(info.setting), std::string(info.default_value)) << info.name;
    EXPECT_EQ(c.source(info.setting), "default") << info.name;
  }
}

TEST_F(ConfigEnvTest, EverySettingIsReadFromBothEnvironmentNames) {
  for (const auto& info : all_settings()) {
    const auto& [in, out] = other_values().at(info.setting);
    for (std::string prefix : {"TUNABLEOP_", "PYTORCH_TUNABLEOP_"}) {
      std::string var = prefix + std::string(info.name);
      set_env(var, in);
      Config c;
      EXPECT_EQ(c.get(info.setting), out) << var;
      EXPECT_EQ(c.source(info.setting), var);
      EXPECT_TRUE(c.warnings().empty()) << var;
      ::unsetenv(var.c_str());
    }
  }
}

TEST_F(ConfigEnvTest, ValuesAreNormalized) {
  Config c = Config::defaults_only();
  for (const char* yes : {"1", "true", "TRUE", "on", "Yes"}) {
    ASSERT_TRUE(c.set(Setting::kNumericalCheck, yes).is_ok()) << yes;
    EXPECT_EQ(c.get(Setting::kNumericalCheck), "1") << yes;
  }
  for (const char* no : {"0", "false", "Off", "no"}) {
    ASSERT_TRUE(c.set(Setting::kNumericalCheck, no).is_ok()) << no;
    EXPECT_EQ(c.get(Setting::kNumericalCheck), "0") << no;
  }
  ASSERT_TRUE(c.set(Setting::kMaxTuningIterations, int64_t{25}).is_ok());
  EXPECT_EQ(c.get(Setting::kMaxTuningIterations), "25");
  ASSERT_TRUE(c.set(Setting::kMaxTuningDurationMs, 2.5).is_ok());
  EXPECT_EQ(c.get(Setting::kMaxTuningDurationMs), "2.5");
  ASSERT_TRUE(c.set(Setting::kMaxTuningDurationMs, 30.0).is_ok());
  EXPECT_EQ(c.get(Setting::kMaxTuningDurationMs), "30");
  ASSERT_TRUE(c.set(Setting::kVerbose, true).is_ok());  // bool overload on an int setting: "1"
  EXPECT_EQ(c.get(Setting::kVerbose), "1");
}

TEST_F(ConfigEnvTest, SnapshotMapsEverySettingToItsField) {
  Config c = Config::defaults_only();
  for (const auto& info : all_settings())
    ASSERT_TRUE(c.set(info.setting, other_values().at(info.setting).first).is_ok());
  Options o = c.snapshot();
  EXPECT_TRUE(o.enabled);
  EXPECT_FALSE(o.tuning);
  EXPECT_EQ(o.verbose, 3);
  EXPECT_EQ(o.filename, "/tmp/x_%d.csv");
  EXPECT_TRUE(o.record_untuned);
  EXPECT_EQ(o.untuned_filename, "u.csv");
  const TuningPolicy& p = o.policy;
  EXPECT_FALSE(p.numerical_check);
  EXPECT_DOUBLE_EQ(p.max_tuning_ms, 12.5);
  EXPECT_EQ(p.max_tuning_iters, 7);
  EXPECT_DOUBLE_EQ(p.max_warmup_ms, 0);
  EXPECT_EQ(p.max_warmup_iters, 2);
  EXPECT_EQ(p.rotating_buffer_mib, 0);
  EXPECT_EQ(p.search_effort, 2);
  EXPECT_DOUBLE_EQ(p.min_improvement, 0.1);
  EXPECT_DOUBLE_EQ(p.screen_ratio_1, 3);
  EXPECT_DOUBLE_EQ(p.screen_ratio_2, 1.25);
  EXPECT_DOUBLE_EQ(p.max_problem_ms, 500);
  EXPECT_TRUE(p.allow_tf32);
}

TEST_F(ConfigEnvTest, CopiesCarryEnvironmentAndApiValues) {
  set_env("TUNABLEOP_VERBOSE", "2");
  Config a;
  ASSERT_TRUE(a.set(Setting::kEnabled, true).is_ok());
  Config b(a);
  EXPECT_EQ(b.get(Setting::kVerbose), "2");
  EXPECT_EQ(b.source(Setting::kVerbose), "TUNABLEOP_VERBOSE");
  EXPECT_EQ(b.get(Setting::kEnabled), "1");
  // Independent afterwards.
  b.unset(Setting::kEnabled);
  EXPECT_EQ(a.get(Setting::kEnabled), "1");
  Config d = Config::defaults_only();
  d = a;
  EXPECT_EQ(d.get(Setting::kEnabled), "1");
  EXPECT_EQ(d.get(Setting::kVerbose), "2");
}

TEST_F(ConfigEnvTest, EverySetAndUnsetPublishesANewSnapshotAndOldOnesStayValid) {
  Config c = Config::defaults_only();
  const Options& before = c.options();
  const uint64_t g0 = c.generation();
  ASSERT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  const Options& after = c.options();
  EXPECT_NE(&before, &after);
  EXPECT_GT(c.generation(), g0);
  EXPECT_FALSE(before.enabled) << "a published snapshot never changes";
  EXPECT_TRUE(after.enabled);
  const uint64_t g1 = c.generation();
  c.unset(Setting::kEnabled);
  EXPECT_GT(c.generation(), g1);
  EXPECT_FALSE(c.options().enabled);
  EXPECT_TRUE(after.enabled) << "still readable after later changes";
  // A refused value publishes nothing.
  const uint64_t g2 = c.generation();
  EXPECT_FALSE(c.set(Setting::kVerbose, "loud").is_ok());
  EXPECT_EQ(c.generation(), g2);
  c.unset_all();
  EXPECT_GT(c.generation(), g2);
}

TEST_F(ConfigEnvTest, GenerationsNeverRepeatAcrossConfigsAndAssignment) {
  Config a = Config::defaults_only();
  Config b = Config::defaults_only();
  EXPECT_NE(a.generation(), b.generation());
  const uint64_t before = a.generation();
  a = b;  // assignment is a settings change of `a`
  EXPECT_GT(a.generation(), before);
  EXPECT_NE(a.generation(), b.generation());
  Config copy(a);
  EXPECT_NE(copy.generation(), a.generation());
}

TEST_F(ConfigEnvTest, ReadersSeeWholeSnapshotsWhileAWriterChangesSettings) {
  // Enabled and verbose are always changed together below: a reader must never see a mix.
  Config c = Config::defaults_only();
  ASSERT_TRUE(c.set(Setting::kVerbose, 1).is_ok());
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!stop.load()) {
        const Options& o = c.options();
        if (o.enabled != (o.verbose == 2)) ++torn;
      }
    });
  for (int i = 0; i < 2000; ++i) {
    Config next = Config::defaults_only();
    ASSERT_TRUE(next.set(Setting::kEnabled, i % 2 == 0).is_ok());
    ASSERT_TRUE(next.set(Setting::kVerbose, i % 2 == 0 ? 2 : 1).is_ok());
    c = next;  // one publication carrying both changes
  }
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace tunableop
