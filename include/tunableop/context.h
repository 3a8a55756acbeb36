// A context owns the configuration, the registry, the results (memory + file) and the tuner for
// one device. Nothing else in the library is global, except default_context() for convenience.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>

#include "tunableop/config.h"
#include "tunableop/device.h"
#include "tunableop/log.h"
#include "tunableop/registry.h"
#include "tunableop/results.h"
#include "tunableop/status.h"
#include "tunableop/tuner.h"

namespace tunableop {

class Context {
 public:
  // `register_backends` fills the registry (tunableop::register_all_backends by default).
  explicit Context(Device device = Device::cpu(), Config config = Config(), RegisterFn register_backends = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  Config& config() { return config_; }
  Registry& registry() { return registry_; }
  Logger& log() { return log_; }
  ResultsStore& results() { return store_; }
  // The environment as validator lines (TUNABLEOP_VERSION, CPU, library versions, ...).
  Validators current_validators() const;
  // Results file in use for this context, after the %d rule and any validator mismatch; empty
  // until results are first loaded.
  std::string results_path();
  // Loads the results file now (normally done lazily on first dispatch). Safe to call again
  // after changing kFilename: reloads from the new file.
  Status load_results();
  // Writes every in-memory result to `path` (validators of this context first), replacing it
  // atomically; a path that is not a regular file (symlink, FIFO, device, ...) is refused.
  Status write_results(const std::string& path);
  // Results this context tuned that did not reach the results file (it could not be read or
  // written: a directory, a FIFO, a full disk, ...), each with the reason. The CLI reports them
  // and exits non-zero; a program can save them elsewhere (format_entry gives the file line).
  struct UnsavedResult {
    ResultEntry entry;
    Status why;
    bool line_written = false;  // only its statistics (the .stats sidecar) were not written
  };
  std::vector<UnsavedResult> unsaved_results();

  // Dispatch core, used by ops:
  //   enabled off               -> "Default"
  //   hit (and is_valid(name))  -> that name
  //   miss, tuning on           -> tune via make_problem(), append, that name
  //   miss, tuning off          -> "Default" (+ untuned file when recording)
  // `is_valid` rejects foreign or stale solution names (they are then treated as a miss).
  StatusOr<std::string> choose(const std::string& op, const std::string& params,
                               const std::function<bool(const std::string&)>& is_valid,
                               const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem);
  // Tunes now (used by `tunableop tune` and the benchmarks), regardless of kEnabled/kTuning;
  // appends to the file unless the key is already stored and `retune` is false.
  StatusOr<TuningReport> tune(TuningProblem& problem, bool retune = false);

  // Per-context state an op keeps between calls (e.g. GEMM's resolved-candidate cache); created
  // on first use, lives as long as the context.
  template <class T>
  T& op_state() {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto& slot = op_state_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *std::static_pointer_cast<T>(slot);
  }

 private:
  Status ensure_loaded_locked();
  void record_untuned(const std::string& op, const std::string& params);

  Device device_;
  Config config_;
  Registry registry_;
  Logger log_;
  ResultsStore store_;
  std::mutex file_mu_;  // guards file_, untuned_
  std::mutex tune_mu_;  // one problem tuned at a time per context
  std::unique_ptr<ResultsFile> file_;
  std::string loaded_pattern_;
  Status load_error_;  // why file_ is null after a failed load
  std::vector<UnsavedResult> unsaved_;
  std::unique_ptr<UntunedFile> untuned_;
  std::string untuned_pattern_;
  bool untuned_refused_ = false;  // untuned_pattern_ names a directory (warned once)
  std::mutex state_mu_;
  std::map<std::type_index, std::shared_ptr<void>> op_state_;
};

// Every backend compiled into this build, in priority order (defined in src/backends).
void register_all_backends(Registry& r);

// A process-wide CPU context created on first use (reads the environment then).
Context& default_context();

}  // namespace tunableop
