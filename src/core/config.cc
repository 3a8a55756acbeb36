#include "tunableop/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace tunableop {

namespace {

enum class Kind { kBool, kInt, kDouble, kString };

struct Spec {
  SettingInfo info;
  Kind kind;
  double lo = 0, hi = 0;  // numeric range
};

const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {{Setting::kEnabled, "ENABLED", "0", "look up tuned results (off: always Default)"}, Kind::kBool},
      {{Setting::kTuning, "TUNING", "1", "tune problems missing from the results"}, Kind::kBool},
      {{Setting::kVerbose, "VERBOSE", "0", "0 silent .. 3 every measurement"}, Kind::kInt, 0, 3},
      {{Setting::kFilename, "FILENAME", "tunableop_results%d.csv", "results file; %d -> device ordinal"},
       Kind::kString},
      {{Setting::kNumericalCheck, "NUMERICAL_CHECK", "1", "reject candidates that differ from the reference"},
       Kind::kBool},
      // Bounded (issue 33): 1e7 ms per candidate was accepted and never ended. A minute per
      // candidate, a million runs and an hour per problem are far beyond any useful setting.
      {{Setting::kMaxTuningDurationMs, "MAX_TUNING_DURATION_MS", "30", "timing budget per candidate (ms)"},
       Kind::kDouble,
       0,
       60000},
      {{Setting::kMaxTuningIterations, "MAX_TUNING_ITERATIONS", "100", "timing runs per candidate at most"},
       Kind::kInt,
       1,
       1e6},
      {{Setting::kMaxWarmupDurationMs, "MAX_WARMUP_DURATION_MS", "30", "warm-up budget per candidate (ms)"},
       Kind::kDouble,
       0,
       60000},
      {{Setting::kMaxWarmupIterations, "MAX_WARMUP_ITERATIONS", "100", "warm-up runs per candidate at most"},
       Kind::kInt,
       1,
       1e6},
      {{Setting::kRotatingBufferSize, "ROTATING_BUFFER_SIZE", "-1",
        "MiB of rotating input copies (0 off, -1 auto: larger than the last-level cache)"},
       Kind::kInt,
       -1,
       1 << 20},
      {{Setting::kRecordUntuned, "RECORD_UNTUNED", "0", "write unseen problems to the untuned file"}, Kind::kBool},
      {{Setting::kUntunedFilename, "UNTUNED_FILENAME", "tunableop_untuned%d.csv", "untuned problems file"},
       Kind::kString},
      {{Setting::kSearchEffort, "SEARCH_EFFORT", "1", "0 few, 1 default, 2 exhaustive candidates"}, Kind::kInt, 0, 2},
      {{Setting::kMinImprovement, "MIN_IMPROVEMENT", "0.02", "fraction a winner must beat Default by"},
       Kind::kDouble,
       0,
       1},
      {{Setting::kScreenRatio1, "SCREEN_RATIO_1", "1.5", "first screening cut (x best so far)"}, Kind::kDouble, 1, 1e6},
      {{Setting::kScreenRatio2, "SCREEN_RATIO_2", "1.15", "second screening cut (x best so far)"},
       Kind::kDouble,
       1,
       1e6},
      {{Setting::kMaxProblemDurationMs, "MAX_PROBLEM_DURATION_MS", "10000", "total tuning budget per problem (ms)"},
       Kind::kDouble,
       1,
       3.6e6},
      {{Setting::kAllowTf32, "ALLOW_TF32", "0", "fp32 GEMMs may use tf32 (changes results)"}, Kind::kBool},
      {{Setting::kSustainedMinCallMs, "SUSTAINED_MIN_CALL_MS", "0.1",
        "Default's call time (ms) from which the final rounds run under sustained load"},
       Kind::kDouble,
       0,
       1e9},
      {{Setting::kSustainedHeatMs, "SUSTAINED_HEAT_MS", "250",
        "load (ms) before sustained final rounds count, at most (less once the GPU reports its cap)"},
       Kind::kDouble,
       0,
       60000},
  };
  return s;
}

const Spec& spec(Setting s) {
  for (const auto& sp : specs())
    if (sp.info.setting == s) return sp;
  return specs().front();  // unreachable: every Setting has a spec
}

std::string lower(std::string_view v) {
  std::string out(v);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Canonical text of a valid value, or an error naming the setting.
StatusOr<std::string> normalize(const Spec& sp, std::string_view value) {
  std::string name = "TUNABLEOP_" + std::string(sp.info.name);
  switch (sp.kind) {
    case Kind::kBool: {
      std::string v = lower(value);
      if (v == "1" || v == "true" || v == "on" || v == "yes") return std::string("1");
      if (v == "0" || v == "false" || v == "off" || v == "no" || v.empty()) return std::string("0");
      return Status::invalid_argument(fmt::format("{}: '{}' is not a boolean (use 0 or 1)", name, value));
    }
    case Kind::kInt:
    case Kind::kDouble: {
      std::string v(value);
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size())
        return Status::invalid_argument(fmt::format("{}: '{}' is not a number", name, value));
      if (sp.kind == Kind::kInt && d != double(int64_t(d)))
        return Status::invalid_argument(fmt::format("{}: '{}' is not an integer", name, value));
      if (!(d >= sp.lo && d <= sp.hi))  // also rejects NaN, which compares false both ways
        return Status::invalid_argument(fmt::format("{}: {} is outside [{}, {}]", name, value, sp.lo, sp.hi));
      return sp.kind == Kind::kInt ? std::to_string(int64_t(d)) : fmt::format("{}", d);
    }
    case Kind::kString:
      if (value.empty()) return Status::invalid_argument(fmt::format("{}: empty value", name));
      return std::string(value);
  }
  return Status::internal("unknown setting kind");
}

}  // namespace

const std::vector<SettingInfo>& all_settings() {
  static const std::vector<SettingInfo> infos = [] {
    std::vector<SettingInfo> v;
    for (const auto& sp : specs()) v.push_back(sp.info);
    return v;
  }();
  return infos;
}

std::optional<Setting> setting_from_name(std::string_view name) {
  for (std::string_view prefix : {"PYTORCH_TUNABLEOP_", "TUNABLEOP_"})
    if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& sp : specs())
    if (sp.info.name == upper) return sp.info.setting;
  return std::nullopt;
}

namespace {
// Process-wide, so that two Configs (or a Config assigned from another) never publish the same
// generation: a plan that saw generation g must notice any later change.
std::atomic<uint64_t> g_next_generation{1};
}  // namespace

Config::Config() : Config(true) {}
Config Config::defaults_only() { return Config(false); }

Config::Config(bool read_env) {
  std::lock_guard<std::mutex> lock(mu_);
  if (read_env) {
    for (const auto& sp : specs()) {
      // TUNABLEOP_* wins over PYTORCH_TUNABLEOP_*: it is the more specific name.
      for (std::string prefix : {"PYTORCH_TUNABLEOP_", "TUNABLEOP_"}) {
        std::string var = prefix + std::string(sp.info.name);
        const char* v = std::getenv(var.c_str());
        if (!v) continue;
        auto norm = normalize(sp, v);
        if (!norm.is_ok()) {
          warnings_.push_back(fmt::format("ignoring {}={}: {}", var, v, norm.status().message()));
          continue;
        }
        env_[sp.info.setting] = *norm;
        env_source_[sp.info.setting] = var;
      }
    }
  }
  publish_locked();
}

Config::Config(const Config& o) {
  std::scoped_lock lock(mu_, o.mu_);
  env_ = o.env_;
  env_source_ = o.env_source_;
  api_ = o.api_;
  warnings_ = o.warnings_;
  publish_locked();
}

Config& Config::operator=(const Config& o) {
  if (this == &o) return *this;
  std::scoped_lock lock(mu_, o.mu_);
  env_ = o.env_;
  env_source_ = o.env_source_;
  api_ = o.api_;
  warnings_ = o.warnings_;
  publish_locked();
  return *this;
}

Status Config::set(Setting s, std::string_view value) {
  auto norm = normalize(spec(s), value);
  if (!norm.is_ok()) return norm.status();
  std::lock_guard<std::mutex> lock(mu_);
  api_[s] = *norm;
  publish_locked();
  return Status::ok();
}

Status Config::set(Setting s, double value) { return set(s, std::string_view(fmt::format("{}", value))); }

void Config::unset(Setting s) {
  std::lock_guard<std::mutex> lock(mu_);
  api_.erase(s);
  publish_locked();
}

void Config::unset_all() {
  std::lock_guard<std::mutex> lock(mu_);
  api_.clear();
  publish_locked();
}

std::string Config::get_locked(Setting s) const {
  if (auto it = api_.find(s); it != api_.end()) return it->second;
  if (auto it = env_.find(s); it != env_.end()) return it->second;
  return std::string(spec(s).info.default_value);
}

std::string Config::get(Setting s) const {
  std::lock_guard<std::mutex> lock(mu_);
  return get_locked(s);
}

std::string Config::source(Setting s) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (api_.count(s)) return "api";
  if (auto it = env_source_.find(s); it != env_source_.end()) return it->second;
  return "default";
}

std::vector<std::string> Config::warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

void Config::publish_locked() {
  // Values in the maps are normalized (validated) text, so these conversions cannot fail.
  auto b = [&](Setting s) { return get_locked(s) == "1"; };
  auto i = [&](Setting s) { return std::stoll(get_locked(s)); };
  auto d = [&](Setting s) { return std::stod(get_locked(s)); };
  auto o = std::make_unique<Options>();
  o->generation = g_next_generation.fetch_add(1, std::memory_order_relaxed);
  o->enabled = b(Setting::kEnabled);
  o->tuning = b(Setting::kTuning);
  o->verbose = int(i(Setting::kVerbose));
  o->filename = get_locked(Setting::kFilename);
  o->record_untuned = b(Setting::kRecordUntuned);
  o->untuned_filename = get_locked(Setting::kUntunedFilename);
  TuningPolicy& p = o->policy;
  p.numerical_check = b(Setting::kNumericalCheck);
  p.max_tuning_ms = d(Setting::kMaxTuningDurationMs);
  p.max_tuning_iters = i(Setting::kMaxTuningIterations);
  p.max_warmup_ms = d(Setting::kMaxWarmupDurationMs);
  p.max_warmup_iters = i(Setting::kMaxWarmupIterations);
  p.rotating_buffer_mib = i(Setting::kRotatingBufferSize);
  p.search_effort = int(i(Setting::kSearchEffort));
  p.min_improvement = d(Setting::kMinImprovement);
  p.screen_ratio_1 = d(Setting::kScreenRatio1);
  p.screen_ratio_2 = d(Setting::kScreenRatio2);
  p.max_problem_ms = d(Setting::kMaxProblemDurationMs);
  p.allow_tf32 = b(Setting::kAllowTf32);
  p.sustained_min_call_ms = d(Setting::kSustainedMinCallMs);
  p.sustained_heat_ms = d(Setting::kSustainedHeatMs);
  current_.store(o.get(), std::memory_order_release);
  published_.push_back(std::move(o));
}

}  // namespace tunableop
