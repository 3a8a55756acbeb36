// The plain lists backends register into (ggml style): candidates per op, device runtimes,
// validators. Core never looks inside a candidate type; ops give the lists their meaning.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "tunableop/checked_size.h"
#include "tunableop/device.h"
#include "tunableop/status.h"
#include "tunableop/timer.h"
#include "tunableop/types.h"

namespace tunableop {

// Memory, copies and timers for one device kind; ops use it so that they stay device-agnostic.
struct DeviceRuntime {
  DeviceKind kind = DeviceKind::kCpu;
  std::function<StatusOr<void*>(size_t bytes)> alloc;
  std::function<void(void*)> free;
  enum class Copy { kHostToDevice, kDeviceToHost, kDeviceToDevice };
  std::function<Status(void* dst, const void* src, size_t bytes, Copy dir, void* stream)> copy;
  std::function<Status(void* stream)> synchronize;
  std::function<std::unique_ptr<Timer>(void* stream)> make_timer;
  std::function<size_t()> last_level_cache_bytes;
  // Memory that can be allocated on this device now (host: available_host_memory_bytes(); CUDA:
  // cudaMemGetInfo's free bytes). Tuning sizes its copies by it and skips what does not fit.
  std::function<uint64_t()> free_memory_bytes = [] { return available_host_memory_bytes(); };
  std::function<int()> device_count = [] { return 1; };
  // Makes `ordinal` the current device of the calling thread (CUDA: cudaSetDevice).
  std::function<Status(int ordinal)> set_device = [](int) { return Status::ok(); };
  // A fresh stream for benchmarks (nullptr: the default stream) and its release.
  std::function<void*()> create_stream = [] { return static_cast<void*>(nullptr); };
  std::function<void(void*)> destroy_stream = [](void*) {};
  // After a failed candidate: clear recoverable error state; a non-ok answer means the device
  // is unusable (sticky fault) and the message says so.
  std::function<Status()> recover = [] { return Status::ok(); };
  // Optional: sets `bytes` bytes at dst to `value` on the stream (cudaMemsetAsync, memset).
  // Unset: the op copies a host buffer.
  std::function<Status(void* dst, int value, size_t bytes, void* stream)> fill_bytes;
  // Optional: relative Frobenius error ||c - ref|| / ||ref|| over the m x n matrices of two
  // outputs that live on this device; +inf when c holds NaN/Inf. Unset: the op copies both
  // outputs to the host and compares there.
  std::function<StatusOr<double>(DType dtype, const void* c, const void* ref, int64_t m, int64_t n, int64_t ldc,
                                 int64_t batch, int64_t stride_c, void* stream)>
      relative_error;
  // Optional: whether `stream` is capturing a CUDA graph (an error asking counts as capturing):
  // a plan that must decide then decides from stored results only, since tuning allocates and
  // synchronizes (tunableop/op.h). Unset (CPU): never.
  std::function<bool(void* stream)> capturing;
  // Optional: `body` (which enqueues calls on `stream`) captured once into a graph and replayed;
  // returns the median milliseconds per replay. What a caller that runs an op from a CUDA graph
  // (the engine's decode step, PyTorch's benchmarks) pays, without per-launch host work. Unset
  // (CPU): not offered.
  std::function<StatusOr<double>(const std::function<Status()>& body, void* stream)> replay_ms;
};

// One "Validator,KEY,VALUE" line source. Value() is evaluated when a results file is opened.
struct ValidatorSource {
  std::string key;
  std::function<std::string()> value;
  DeviceKind device = DeviceKind::kCpu;  // contributes only to contexts of this device kind
  bool all_devices = false;              // e.g. TUNABLEOP_VERSION
};

class Registry {
 public:
  // The list of candidates of type C (e.g. GemmCandidate); created empty on first use.
  template <class C>
  std::vector<C>& list() {
    auto it = lists_.find(std::type_index(typeid(C)));
    if (it == lists_.end()) it = lists_.emplace(std::type_index(typeid(C)), std::vector<C>{}).first;
    return *std::any_cast<std::vector<C>>(&it->second);
  }
  template <class C>
  const std::vector<C>* find_list() const {
    auto it = lists_.find(std::type_index(typeid(C)));
    return it == lists_.end() ? nullptr : std::any_cast<std::vector<C>>(&it->second);
  }

  void add_runtime(DeviceRuntime rt) { runtimes_.push_back(std::move(rt)); }
  const DeviceRuntime* runtime(DeviceKind kind) const;
  void add_validator(ValidatorSource v) { validators_.push_back(std::move(v)); }
  const std::vector<ValidatorSource>& validators() const { return validators_; }
  // Backends that were built but could not start (library missing at run time, ...): one line
  // each, printed once at verbose >= 1.
  void add_note(std::string line) { notes_.push_back(std::move(line)); }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::map<std::type_index, std::any> lists_;
  std::vector<DeviceRuntime> runtimes_;
  std::vector<ValidatorSource> validators_;
  std::vector<std::string> notes_;
};

using RegisterFn = std::function<void(Registry&)>;

}  // namespace tunableop
