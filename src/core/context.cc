#include "tunableop/context.h"

#include <fmt/format.h>

#include <algorithm>

#include <fstream>

namespace tunableop {

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
  std::lock_guard<std::mutex> lock(file_mu_);
  return load_locked(config_.options());
}

Status Context::ensure_loaded_locked(const Options& o) {
  // Also after a failed load (file_ null): that was reported once; retrying on every
  // revalidation would repeat the warning. A new kFilename or load_results() tries again.
  if (loaded_pattern_ == o.filename && !loaded_pattern_.empty()) return Status::ok();
  return load_locked(o);
}

Status Context::load_locked(const Options& o) {
  file_.reset();
  std::string path = results_path_for(o.filename, std::to_string(device_.ordinal));
  auto file = std::make_unique<ResultsFile>(path, current_validators());
  log_.log(1, fmt::format("reading tuning results from {}", path));
  loaded_pattern_ = o.filename;
  auto report = file->open();
  if (!report.is_ok()) {
    // Keep serving (Default / tuning in memory) but say why nothing is persisted.
    log_.warn(report.status().to_string());
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
  if (!untuned_ || untuned_pattern_ != o.untuned_filename) {
    untuned_ = std::make_unique<UntunedFile>(results_path_for(o.untuned_filename, std::to_string(device_.ordinal)));
    untuned_pattern_ = o.untuned_filename;
  }
  Status st = untuned_->record(op, params);
  if (!st.is_ok()) log_.warn(st.to_string());
}

StatusOr<std::string> Context::choose(const std::string& op, const std::string& params,
                                      const std::function<bool(const std::string&)>& is_valid,
                                      const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem) {
  const Options& o = config_.options();
  log_.set_level(o.verbose);
  if (recording_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(recorded_mu_);
    std::pair<std::string, std::string> key{op, params};
    if (std::find(recorded_.begin(), recorded_.end(), key) == recorded_.end()) recorded_.push_back(std::move(key));
  }
  if (!o.enabled) return std::string("Default");
  {
    std::lock_guard<std::mutex> lock(file_mu_);
    (void)ensure_loaded_locked(o);  // a bad file was reported; keep going in memory
  }
  bool stale = false;
  if (auto hit = store_.lookup(op, params)) {
    if (is_valid(hit->solution)) return hit->solution;
    stale = true;
    std::string msg = fmt::format("solution {} for {}({}) is not available here (foreign or no longer valid); {}",
                                  hit->solution, op, params, o.tuning ? "re-tuning" : "using Default");
    // Re-tuning happens once (the new result replaces the entry): worth a warning. Without
    // tuning this path repeats on every revalidation, so it stays a verbose line.
    if (o.tuning)
      log_.warn(msg);
    else
      log_.log(1, msg);
  }
  if (!o.tuning) {
    if (o.record_untuned) record_untuned(op, params);
    return std::string("Default");
  }
  std::lock_guard<std::mutex> tune_lock(tune_mu_);
  // Tuned meanwhile, by another thread or (picked up from the file) another process?
  (void)refresh_results();
  if (auto hit = store_.lookup(op, params); hit && is_valid(hit->solution)) return hit->solution;
  auto problem = make_problem();
  if (!problem.is_ok()) {
    log_.warn(fmt::format("cannot tune {}({}): {}; using Default", op, params, problem.status().message()));
    return std::string("Default");
  }
  auto report = tune(**problem, stale);
  if (!report.is_ok()) {
    log_.warn(fmt::format("tuning {}({}) failed: {}; using Default", op, params, report.status().to_string()));
    return std::string("Default");
  }
  return report->winner.solution;
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
  if (!ensure_loaded_locked(config_.options()).is_ok() || !file_) return Status::ok();
  std::vector<ResultEntry> picked_up;
  Status st = file_->append(e, replace, &picked_up);
  for (auto& p : picked_up)
    if (!(p.op == e.op && p.params == e.params)) store_.insert(std::move(p));
  if (!st.is_ok()) {
    log_.warn(fmt::format("could not write result to {}: {}", file_->path(), st.to_string()));
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
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Status::io_error("cannot write " + path);
  out << format_validators(current_validators());
  for (const auto& e : store_.entries()) out << format_entry(e);
  out.flush();
  return out ? Status::ok() : Status::io_error("short write to " + path);
}

}  // namespace tunableop
