// A virtual clock for dispatch tests: test candidates advance it by their nominal cost, so
// tuning decisions do not depend on how loaded the machine running the tests is.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "backends/cpu_runtime.h"
#include "tunableop/registry.h"
#include "tunableop/timer.h"

namespace tunableop::testing {

class VirtualTimer : public Timer {
 public:
  explicit VirtualTimer(std::atomic<double>& clock) : clock_(clock) {}
  void start() override { t0_ = clock_.load(); }
  double stop_ms() override { return clock_.load() - t0_; }
  double now_ms() override { return clock_.load(); }

 private:
  std::atomic<double>& clock_;
  double t0_ = 0;
};

// The host runtime and validators into r, with every timer reading `clock`; `capturing`, when
// given, answers DeviceRuntime::capturing (a pretend CUDA graph capture).
inline void register_host_on_virtual_clock(Registry& r, std::atomic<double>& clock,
                                           std::function<bool(void*)> capturing = {}) {
  Registry host;
  register_cpu_runtime(host);
  DeviceRuntime rt = *host.runtime(DeviceKind::kCpu);
  rt.make_timer = [&clock](void*) -> std::unique_ptr<Timer> { return std::make_unique<VirtualTimer>(clock); };
  rt.capturing = std::move(capturing);
  r.add_runtime(std::move(rt));
  for (const auto& v : host.validators()) r.add_validator(v);
}

}  // namespace tunableop::testing
