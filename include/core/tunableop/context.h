// A context owns the configuration, the registry, the results (memory + file) and the tuner for
// one device. Nothing else in the library is global, except default_context() for convenience.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "tunableop/choice.h"
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
  // Every backend of this build. Defined by the registry glue (src/backends/register_all.cc),
  // which the umbrella library `tunableop` contains; core alone does not know any backend.
  explicit Context(Device device = Device::cpu(), Config config = Config());
  // Exactly the backends `register_backends` registers (tests, embedders, core-only builds).
  Context(Device device, Config config, RegisterFn register_backends);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  Config& config() { return config_; }
  const Options& options() const { return config_.options(); }  // one atomic load
  Registry& registry() { return registry_; }
  const DeviceRuntime* runtime() const { return runtime_; }  // this device's, or null
  Logger& log() { return log_; }
  ResultsStore& results() { return store_; }
  // The environment as validator lines (TUNABLEOP_VERSION, CPU, library versions, ...).
  Validators current_validators() const;

  // Changes whenever a setting changes (Config::set/unset) or the results do (load, reload,
  // refresh, a new tuning, results().insert). Two atomic loads: plans compare it on every run
  // and revalidate (look up, resolve, maybe tune) only when it moved.
  uint64_t generation() const { return config_.generation() + store_.version(); }

  // --- Results file. Loaded once, on the first dispatch that needs it (enabled and a
  // revalidation), and again only when asked: the hot path never touches the file system.
  // Results file in use for this context, after the %d rule and any validator mismatch; empty
  // until results are first loaded.
  std::string results_path();
  // Loads (or reloads) the results file now: explicit reload. A changed kFilename is picked up
  // by the next dispatch after the change (it changes the generation).
  Status load_results();
  // Picks up what other processes changed in the file since it was read: appended lines are
  // merged in, a replaced file (`tunableop merge -o` over it) or a truncated one is reloaded.
  // One stat(2) when nothing changed. Dispatch calls it before tuning a miss (another process
  // may have tuned that problem meanwhile); callers may call it whenever they like.
  Status refresh_results();
  // Stores e in memory and appends it to the results file (`replace`: even when the file has
  // the key already; the later line wins on load). What tune() does with a winner.
  Status store_result(ResultEntry e, bool replace);
  // Between start and stop, every (op, params) that decide() is asked about is recorded, in
  // first-asked order: the problems a workload uses (in_context.h).
  void start_recording_choices();
  std::vector<std::pair<std::string, std::string>> stop_recording_choices();
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

  // The dispatch decision, the one place a solution is chosen; plans make it when they
  // revalidate (never per call) and keep the answer (tunableop/op.h):
  //   enabled off                      -> "Default" (kDisabled)
  //   hit (and is_valid(name))         -> that name (kStored)
  //   miss, tuning on, may_tune        -> tune via make_problem(), append, the winner (kTuned;
  //                                       "Default" and kTuningFailed when it cannot)
  //   miss, tuning on, not may_tune    -> "Default" (kDeferred: a CUDA graph is being captured)
  //   miss, tuning off                 -> "Default" (kNotTuned; + untuned file when recording)
  // `is_valid` rejects foreign or stale solution names (they are then treated as a miss).
  // A miss that cannot be tuned (it does not fit the memory free now, or tuning failed) is tried
  // once per process: it is remembered, written to the untuned file for offline tuning
  // (`tunableop tune`), said once (verbose 1 when it did not fit, a warning otherwise), and
  // answered "Default" from then on without another attempt.
  Choice decide(const std::string& op, const std::string& params,
                const std::function<bool(const std::string&)>& is_valid,
                const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem, bool may_tune = true);
  // decide(...).solution.
  StatusOr<std::string> choose(const std::string& op, const std::string& params,
                               const std::function<bool(const std::string&)>& is_valid,
                               const std::function<StatusOr<std::unique_ptr<TuningProblem>>()>& make_problem);
  // Tunes now (used by `tunableop tune` and the benchmarks), regardless of kEnabled/kTuning;
  // appends to the file unless the key is already stored and `retune` is false.
  StatusOr<TuningReport> tune(TuningProblem& problem, bool retune = false);
  // Why choose() gave up tuning (op, params) in this process; ok when it never did.
  Status tuning_failure(const std::string& op, const std::string& params);

  // A plan for one problem of any op (GemmParams -> Plan<GemmOp>, ...): validated once, then
  // `run` many times; a hit costs one generation check and the candidate's call. The op
  // provides make_plan(Context&, const Params&), found by argument-dependent lookup.
  template <class Params>
  auto plan(const Params& p) {
    return make_plan(*this, p);
  }

  // Per-context state an op keeps between calls (e.g. its plan table); created on first use,
  // lives as long as the context. Lock-free after the first call for a type.
  template <class T>
  T& op_state() {
    static const size_t id = next_op_state_id();
    if (id < fast_states_.size())
      if (void* p = fast_states_[id].load(std::memory_order_acquire)) return *static_cast<T*>(p);
    return *static_cast<T*>(op_state_slow(std::type_index(typeid(T)), id, &make_state<T>));
  }

 private:
  template <class T>
  static std::shared_ptr<void> make_state() {
    return std::make_shared<T>();
  }
  static size_t next_op_state_id();
  void* op_state_slow(std::type_index type, size_t id, std::shared_ptr<void> (*make)());
  Status ensure_loaded_locked(const Options& o);
  Status load_locked(const Options& o);
  void record_untuned(const std::string& op, const std::string& params);
  void give_up_tuning(const std::string& op, const std::string& params, const Status& why);

  Device device_;
  Config config_;
  Registry registry_;
  const DeviceRuntime* runtime_ = nullptr;
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
  std::array<std::atomic<void*>, 32> fast_states_{};  // op_state<T>() by a per-type index
  std::mutex untunable_mu_;
  std::map<std::pair<std::string, std::string>, Status> untunable_;  // tried once, failed (choose)
  std::atomic<bool> recording_{false};
  std::mutex recorded_mu_;
  std::vector<std::pair<std::string, std::string>> recorded_;
};

// A process-wide CPU context with every backend, created on first use (reads the environment
// then). Defined by the registry glue, like the default constructor.
Context& default_context();

}  // namespace tunableop
