#include "tunableop/context.h"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>

#include "tunableop/safe_file.h"
#include "tunableop/status_boundary.h"

namespace tunableop {

namespace {

// A file name pattern that names a directory ("dir/", "/tmp") or something else that is not a
// regular file ("/dev/null") would become a new file beside it ("dir/0", "/tmp0", a regular file
// "/dev/null0" inside /dev): refuse it with a message instead of inventing a name.
Status check_file_pattern(const std::string& pattern, const char* what, const char* example) {
  struct stat st {};
  const bool exists = pattern.find("%d") == std::string::npos && ::stat(pattern.c_str(), &st) == 0;
  if (pattern.empty() || pattern.back() == '/' || (exists && S_ISDIR(st.st_mode))) {
    const std::string dir = pattern.empty() || pattern.back() == '/' ? pattern : pattern + "/";
    return Status::invalid_argument(fmt::format(
        "{} name '{}' names a directory, not a file (give a file name, e.g. '{}{}')", what, pattern, dir, example));
  }
  if (exists && !S_ISREG(st.st_mode))
    return Status::invalid_argument(fmt::format("{} name '{}' names a {}, not a regular file (give a file name)", what,
                                                pattern, file_type_name(st.st_mode)));
  return Status::ok();
}

// Default for a problem whose tuning was given up (Context::give_up_tuning), and why.
Choice given_up(const Status& why) {
  return {"Default",
          why.code() == StatusCode::kResourceExhausted ? ChoiceSource::kDidNotFit : ChoiceSource::kTuningFailed};
}

}  // namespace

Context::Context(Device device, Config config, RegisterFn register_backends)
    : device_(device), config_(std::move(config)) {
  if (register_backends) register_backends(registry_);
  runtime_ = registry_.runtime(device_.kind);
  log_.set_level(config_.options().verbose);
  for (const auto& w : config_.warnings()) log_.warn(w);
  for (const auto& n : registry_.notes()) log_.log(1, n);
}

Context::~Context() = default;

size_t Context::next_op_state_id() {
  static std::atomic<size_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void* Context::op_state_slow(std::type_index type, size_t id, std::shared_ptr<void> (*make)()) {
  std::lock_guard<std::mutex> lock(state_mu_);
  auto& slot = op_state_[type];
  if (!slot) slot = make();
  if (id < fast_states_.size()) fast_states_[id].store(slot.get(), std::memory_order_release);
  return slot.get();
}

Validators Context::current_validators() const {
  Validators v{{"TUNABLEOP_VERSION", TUNABLEOP_VERSION_STRING}};
  for (const auto& src : registry_.validators())
    if (src.all_devices || src.device == device_.kind) v.emplace_back(src.key, src.value());
  return v;
}

std::string Context::results_path() {
  std::lock_guard<std::mutex> lock(file_mu_);
  return file_ ? file_->path() : "";
}

Status Context::load_results() {
  return status_boundary([&] { return "loading the results file " + config_.options().filename; },
                         [&] {
                           std::lock_guard<std::mutex> lock(file_mu_);
                           return load_locked(config_.options());
                         });
}

Status Context::ensure_loaded_locked(const Options& o) {
  // Also after a failed load (file_ null): that was reported once; retrying on every
  // revalidation would repeat the warning. A new kFilename or load_results() tries again.
  if (loaded_pattern_ == o.filename && !loaded_pattern_.empty()) return Status::ok();
  return load_locked(o);
}

Status Context::load_locked(const Options& o) {
  file_.reset();
  loaded_pattern_ = o.filename;
  load_error_ = check_file_pattern(o.filename, "results file", "tunableop_results%d.csv");
  if (!load_error_.is_ok()) {
    log_.warn(load_error_.to_string());
    return load_error_;
  }
  // Absolute once: a program that chdir()s later keeps its results in one file.
  std::string path = absolute_path(results_path_for(o.filename, std::to_string(device_.ordinal)));
  auto file = std::make_unique<ResultsFile>(path, current_validators());
  log_.log(1, fmt::format("reading tuning results from {}", path));
  auto report = file->open();
  if (!report.is_ok()) {
    // Keep serving (Default / tuning in memory) but say why nothing is persisted.
    log_.warn(report.status().to_string());
    load_error_ = report.status();
    return report.status();
  }
  const LoadReport& r = *report;
  if (!r.existed) log_.log(1, fmt::format("could not open {} for reading tuning results", path));
  for (const auto& m : r.malformed) log_.warn("skipping malformed line " + m);
  if (!r.foreign_validators.empty()) {
    std::string keys;
    for (const auto& k : r.foreign_validators) keys += (keys.empty() ? "" : ", ") + k;
    log_.log(1, fmt::format("{} was not written by tunableop (foreign validators: {})", path, keys));
  }
  if (file->path() != path) {
    std::string why;
    for (const auto& m : r.mismatches) why += (why.empty() ? "" : "; ") + m;
    log_.warn(
        fmt::format("validators of {} differ from this environment ({}); keeping {} as it is, writing results "
                    "for this environment to {}",
                    path, why.empty() ? "foreign file" : why, path, file->path()));
  }
  for (const auto& e : r.entries) store_.insert(e);
  for (const auto& [k, v] : r.validators) log_.log(2, fmt::format("Validator,{},{}", k, v));
  if (!r.entries.empty()) log_.log(1, fmt::format("loaded {} results from {}", r.entries.size(), file->path()));
  file_ = std::move(file);
  return Status::ok();
}

Status Context::refresh_results() {
  std::lock_guard<std::mutex> lock(file_mu_);
  if (!file_) return Status::ok();  // nothing loaded yet (or the file is unusable: reported)
  std::vector<ResultEntry> picked_up;
  auto change = file_->refresh(&picked_up);
  if (!change.is_ok()) {
    log_.warn(change.status().to_string());
    return change.status();
  }
  for (auto& e : picked_up) store_.insert(std::move(e));
  if (*change != ResultsFile::Change::kReplaced) return Status::ok();
  log_.log(1, fmt::format("{} was replaced or truncated by another process; reloading it", file_->path()));
  return load_locked(config_.options());
}

void Context::record_untuned(const std::string& op, const std::string& params) {
  const Options& o = config_.options();
  std::lock_guard<std::mutex> lock(file_mu_);
  if ((!untuned_ && !untuned_refused_) || untuned_pattern_ != o.untuned_filename) {
    untuned_.reset();
    untuned_pattern_ = o.untuned_filename;
    Status ok = check_file_pattern(o.untuned_filename, "untuned file", "tunableop_untuned%d.csv");
    untuned_refused_ = !ok.is_ok();
    if (untuned_refused_)
      log_.warn(ok.to_string());  // once per pattern, not per problem
    else
      untuned_ = std::make_unique<UntunedFile>(
          absolute_path(results_path_for(o.untuned_filename, std::to_string(device_.ordinal))));
  }
  if (!untuned_) return;
  Status st = untuned_->record(op, params);
  if (!st.is_ok()) log_.warn(st.to_string());
}

StatusOr<std::string> Context::choose(const std::string& op, const std::string& params,
                                      const std::function<bool(const std::string&)>& is_valid,
                                      const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem) {
  return decide(op, params, is_valid, make_problem).solution;
}

Choice Context::decide(const std::string& op, const std::string& params,
                       const std::function<bool(const std::string&)>& is_valid,
                       const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem, bool may_tune) {
  using Source = ChoiceSource;
  const Options& o = config_.options();
  log_.set_level(o.verbose);
  if (recording_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(recorded_mu_);
    std::pair<std::string, std::string> key{op, params};
    if (std::find(recorded_.begin(), recorded_.end(), key) == recorded_.end()) recorded_.push_back(std::move(key));
  }
  if (!o.enabled) return {"Default", Source::kDisabled};
  {
    std::lock_guard<std::mutex> lock(file_mu_);
    (void)ensure_loaded_locked(o);  // a bad file was reported; keep going in memory
  }
  bool stale = false;
  if (auto hit = store_.lookup(op, params)) {
    if (is_valid(hit->solution)) return {hit->solution, Source::kStored};
    if (Status failed = tuning_failure(op, params); o.tuning && !failed.is_ok())
      return given_up(failed);  // its re-tuning failed: said once, when it did
    stale = true;
    std::string msg = fmt::format("solution {} for {}({}) is not available here (foreign or no longer valid); {}",
                                  hit->solution, op, params,
                                  !o.tuning  ? "using Default"
                                  : may_tune ? "re-tuning"
                                             : "using Default for now");
    // Re-tuning happens once (the new result replaces the entry): worth a warning. Without
    // tuning this path repeats on every revalidation, so it stays a verbose line.
    if (o.tuning && may_tune)
      log_.warn(msg);
    else
      log_.log(1, msg);
  }
  if (!o.tuning) {
    if (o.record_untuned) record_untuned(op, params);
    return {"Default", Source::kNotTuned};
  }
  if (!may_tune) return {"Default", Source::kDeferred};
  if (Status failed = tuning_failure(op, params); !failed.is_ok()) return given_up(failed);  // tried once already
  std::lock_guard<std::mutex> tune_lock(tune_mu_);
  // Tuned meanwhile, by another thread or (picked up from the file) another process?
  (void)refresh_results();
  if (auto hit = store_.lookup(op, params); hit && is_valid(hit->solution)) return {hit->solution, Source::kStored};
  if (Status failed = tuning_failure(op, params); !failed.is_ok()) return given_up(failed);  // another thread gave up
  auto problem = make_problem();
  if (!problem.is_ok()) {
    give_up_tuning(op, params, problem.status());
    return given_up(problem.status());
  }
  auto report = tune(**problem, stale);
  problem->reset();  // the tuning memory goes back before the call runs
  if (!report.is_ok()) {
    give_up_tuning(op, params, report.status());
    return given_up(report.status());
  }
  return {report->winner.solution, Source::kTuned};
}

Status Context::tuning_failure(const std::string& op, const std::string& params) {
  std::lock_guard<std::mutex> lock(untunable_mu_);
  auto it = untunable_.find({op, params});
  return it == untunable_.end() ? Status::ok() : it->second;
}

// Without this, a problem that cannot be tuned was tried again whenever the context's generation
// moved (every other problem's new result moves it): on a GPU, a batch-128 prefill attention
// problem asked for 69 GB on every call and stalled the engine (issue 33).
void Context::give_up_tuning(const std::string& op, const std::string& params, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(untunable_mu_);
    if (!untunable_.emplace(std::make_pair(op, params), why.is_ok() ? Status::internal("unknown") : why).second) return;
  }
  record_untuned(op, params);
  std::string where;
  {
    std::lock_guard<std::mutex> lock(file_mu_);
    if (untuned_) where = fmt::format("; recorded in {} for `tunableop tune`", untuned_->path());
  }
  if (why.code() == StatusCode::kResourceExhausted) {
    log_.log(1, fmt::format("cannot tune {}({}) here: {}; Default serves it in this process{}", op, params,
                            why.message(), where));
  } else {
    log_.warn(fmt::format("tuning {}({}) failed: {}; Default serves it in this process{}", op, params, why.to_string(),
                          where));
  }
}

StatusOr<TuningReport> Context::tune(TuningProblem& problem, bool retune) {
  const Options& o = config_.options();
  log_.set_level(o.verbose);
  Tuner tuner(o.policy, log_);
  auto report = tuner.find_fastest(problem);
  if (!report.is_ok()) return report;
  (void)store_result(report->winner, retune);  // a file that cannot be written was warned about
  return report;
}

Status Context::store_result(ResultEntry e, bool replace) {
  store_.insert(e);
  std::lock_guard<std::mutex> lock(file_mu_);
  const Options& o = config_.options();
  (void)ensure_loaded_locked(o);
  if (!file_) {
    unsaved_.push_back({e, load_error_.is_ok() ? Status::io_error("no results file") : load_error_});
    return unsaved_.back().why;
  }
  std::vector<ResultEntry> picked_up;
  bool line_written = false;
  Status st = file_->append(e, replace, &picked_up, &line_written);
  for (auto& p : picked_up)
    if (!(p.op == e.op && p.params == e.params)) store_.insert(std::move(p));
  std::erase_if(unsaved_, [&](const UnsavedResult& u) { return u.entry.op == e.op && u.entry.params == e.params; });
  if (!st.is_ok()) {
    log_.warn(fmt::format("could not write result to {}: {}", file_->path(), st.to_string()));
    unsaved_.push_back({e, st, line_written});
    return st;
  }
  log_.log(1, fmt::format("writing file {}", file_->path()));
  return Status::ok();
}

void Context::start_recording_choices() {
  std::lock_guard<std::mutex> lock(recorded_mu_);
  recorded_.clear();
  recording_.store(true, std::memory_order_relaxed);
}

std::vector<std::pair<std::string, std::string>> Context::stop_recording_choices() {
  recording_.store(false, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(recorded_mu_);
  return std::move(recorded_);
}

Status Context::write_results(const std::string& path) {
  std::string text = format_validators(current_validators());
  for (const auto& e : store_.entries()) text += format_entry(e);
  return replace_regular_file(path, text);
}

std::vector<Context::UnsavedResult> Context::unsaved_results() {
  std::lock_guard<std::mutex> lock(file_mu_);
  return unsaved_;
}

}  // namespace tunableop
