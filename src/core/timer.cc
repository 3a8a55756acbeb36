#include <chrono>

#include "tunableop/timer.h"

namespace tunableop {

namespace {
double host_now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}
}  // namespace

void HostTimer::start() { t0_ = host_now_ms(); }
double HostTimer::stop_ms() { return host_now_ms() - t0_; }
double HostTimer::now_ms() { return host_now_ms(); }

}  // namespace tunableop
