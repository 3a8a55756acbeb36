// Settings: defaults < PYTORCH_TUNABLEOP_* env < TUNABLEOP_* env < API. The API can set a
// setting either way and unset it again (back to the environment's value or the default).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tunableop/status.h"

namespace tunableop {

enum class Setting {
  kEnabled,               // TUNABLEOP_ENABLED: consult results at all (off -> always Default)
  kTuning,                // TUNABLEOP_TUNING: tune problems not in the results
  kVerbose,               // TUNABLEOP_VERBOSE: 0..3
  kFilename,              // TUNABLEOP_FILENAME: results file, %d -> device ordinal
  kNumericalCheck,        // TUNABLEOP_NUMERICAL_CHECK
  kMaxTuningDurationMs,   // TUNABLEOP_MAX_TUNING_DURATION_MS
  kMaxTuningIterations,   // TUNABLEOP_MAX_TUNING_ITERATIONS
  kMaxWarmupDurationMs,   // TUNABLEOP_MAX_WARMUP_DURATION_MS
  kMaxWarmupIterations,   // TUNABLEOP_MAX_WARMUP_ITERATIONS
  kRotatingBufferSize,    // TUNABLEOP_ROTATING_BUFFER_SIZE: MiB, 0 = off, -1 = auto (LLC / L2)
  kRecordUntuned,         // TUNABLEOP_RECORD_UNTUNED
  kUntunedFilename,       // TUNABLEOP_UNTUNED_FILENAME
  kSearchEffort,          // TUNABLEOP_SEARCH_EFFORT: 0 few, 1 default, 2 exhaustive
  kMinImprovement,        // TUNABLEOP_MIN_IMPROVEMENT: fraction a winner must beat Default by
  kScreenRatio1,          // TUNABLEOP_SCREEN_RATIO_1: first screening cut (x best so far)
  kScreenRatio2,          // TUNABLEOP_SCREEN_RATIO_2: second screening cut
  kMaxProblemDurationMs,  // TUNABLEOP_MAX_PROBLEM_DURATION_MS: total budget per problem
  kAllowTf32,             // TUNABLEOP_ALLOW_TF32: fp32 GEMMs may use tf32 (changes results)
  kSustainedMinCallMs,    // TUNABLEOP_SUSTAINED_MIN_CALL_MS: Default's call time from which the
                          // final rounds run under sustained load
  kSustainedHeatMs,       // TUNABLEOP_SUSTAINED_HEAT_MS: load before those rounds count, at most
};

struct SettingInfo {
  Setting setting;
  std::string_view name;  // env suffix, e.g. "MAX_TUNING_DURATION_MS"
  std::string_view default_value;
  std::string_view help;
};
const std::vector<SettingInfo>& all_settings();
std::optional<Setting> setting_from_name(std::string_view name);  // "TUNING" or "TUNABLEOP_TUNING"

// The tuning protocol's knobs as one value (DESIGN.md, "Tuning policy").
struct TuningPolicy {
  double max_warmup_ms = 30;
  int64_t max_warmup_iters = 100;
  double max_tuning_ms = 30;
  int64_t max_tuning_iters = 100;
  int screen_runs_1 = 1;  // samples before the first cut (a sample batches short runs)
  double screen_ratio_1 = 1.5;
  int screen_runs_2 = 0;  // 0: the second cut is left to the halving rounds (tuner.h)
  double screen_ratio_2 = 1.15;
  bool numerical_check = true;
  int64_t rotating_buffer_mib = -1;  // -1 auto: exceed the device's last-level cache
  int finalists = 2;                 // re-measured together with Default
  int remeasure_rounds = 7;          // at most; at least 5 (or this), more while within remeasure_ms
  double remeasure_ms = 60;          // time for the interleaved re-measurement (after 5 rounds)
  double min_improvement = 0.02;
  double max_problem_ms = 10000;
  int search_effort = 1;
  bool allow_tf32 = false;
  // Sustained timing (docs/design.md, "Sustained timing"): a problem whose Default call takes
  // at least sustained_min_call_ms is one whose workload heats the device to its power cap, so
  // its final rounds count only after the finalists ran back to back for sustained_heat_ms (less
  // once the device reports a power or thermal limit). Both are set from scripts/gpu-sustained.sh's
  // measurement of the clock against the length of the load.
  double sustained_min_call_ms = 0.1;
  double sustained_heat_ms = 250;
};

// Every setting, parsed, at one moment. Immutable once published: readers never lock or parse.
struct Options {
  // Changes with every set/unset (process-wide counter, so it never repeats): a plan or cache
  // keyed on it notices any settings change with one comparison.
  uint64_t generation = 0;
  bool enabled = false;
  bool tuning = true;
  int verbose = 0;
  std::string filename = "tunableop_results%d.csv";
  bool record_untuned = false;
  std::string untuned_filename = "tunableop_untuned%d.csv";
  TuningPolicy policy;
};

class Config {
 public:
  // Reads the environment once (PYTORCH_TUNABLEOP_* then TUNABLEOP_*). Bad env values are
  // reported in `warnings()` and ignored.
  Config();
  static Config defaults_only();  // ignores the environment (tests)
  Config(const Config& other);
  Config& operator=(const Config& other);

  Status set(Setting s, std::string_view value);  // validated; InvalidArgument names the setting
  Status set(Setting s, bool value) { return set(s, std::string_view(value ? "1" : "0")); }
  Status set(Setting s, int64_t value) { return set(s, std::string_view(std::to_string(value))); }
  Status set(Setting s, int value) { return set(s, static_cast<int64_t>(value)); }
  Status set(Setting s, double value);
  Status set(Setting s, const char* value) { return set(s, std::string_view(value)); }
  void unset(Setting s);  // back to env value or default
  void unset_all();

  std::string get(Setting s) const;
  // Where the current value comes from: "api", "TUNABLEOP_X", "PYTORCH_TUNABLEOP_X", "default".
  std::string source(Setting s) const;
  std::vector<std::string> warnings() const;

  // The current settings: one atomic load, no lock, no parsing (the hot path reads this). Every
  // set/unset publishes a new snapshot; old ones stay alive until the Config dies (settings
  // change rarely), so a reference taken here stays valid for the Config's lifetime.
  const Options& options() const { return *current_.load(std::memory_order_acquire); }
  uint64_t generation() const { return options().generation; }
  Options snapshot() const { return options(); }  // a copy

 private:
  explicit Config(bool read_env);
  std::string get_locked(Setting s) const;
  void publish_locked();  // parses the maps into a new Options and swaps it in
  mutable std::mutex mu_;
  std::map<Setting, std::string> env_;  // validated env values
  std::map<Setting, std::string> env_source_;
  std::map<Setting, std::string> api_;
  std::vector<std::string> warnings_;
  std::vector<std::unique_ptr<const Options>> published_;  // every snapshot ever published
  std::atomic<const Options*> current_{nullptr};
};

}  // namespace tunableop
