// 3. Candidates of the toy op, each advancing a virtual clock by its nominal cost; plus a
// registry with the host runtime timed by that clock (support/virtual_clock.h).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "ops/framework/toy_op.h"
#include "support/virtual_clock.h"

namespace tunableop::toy {

// Default (1 ms), Scale_Fast (0.2 ms), Scale_Wrong (fastest, off by one element),
// Scale_Lazy (never writes y), Scale_Flaky (0.1 ms; fails at run time when told to).
class ToyBackend {
 public:
  RegisterFn registrar(std::vector<std::string> names) {
    return [this, names](Registry& r) {
      testing::register_host_on_virtual_clock(r, clock_, [this](void*) { return capturing.load(); });
      for (const auto& n : names) r.list<ScaleCandidate>().push_back(candidate(n));
    };
  }
  int calls(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[name];
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
  }
  std::atomic<bool> flaky_fails{false};
  std::atomic<bool> capturing{false};  // what the runtime says of every stream

 private:
  template <class T>
  static void scale_loop(const ScaleParams& p, const ScaleOperands& o) {
    for (int64_t i = 0; i < p.n; ++i) static_cast<T*>(o.y)[i] = T(p.alpha * static_cast<const T*>(o.x)[i]);
  }
  ScaleCandidate candidate(const std::string& name) {
    ScaleCandidate c;
    c.name = name;
    c.supports = [](const ScaleParams&) { return Status::ok(); };
    c.info = {"toy", name, {{"cost", "virtual"}}};
    const double cost = name == "Default" ? 1.0 : name == "Scale_Fast" ? 0.2 : name == "Scale_Flaky" ? 0.1 : 0.01;
    c.run = [this, name, cost](const ScaleParams& p, const ScaleOperands& o) -> Status {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[name];
      }
      if (name == "Scale_Flaky" && flaky_fails) return Status::internal("Scale_Flaky lost its device");
      if (name != "Scale_Lazy") {
        if (p.dtype == DType::kF32)
          scale_loop<float>(p, o);
        else
          scale_loop<double>(p, o);
      }
      if (name == "Scale_Wrong") store_from_double(p.dtype, o.y, 0, load_as_double(p.dtype, o.y, 0) + 1.0);
      clock_.store(clock_.load() + cost);
      return Status::ok();
    };
    return c;
  }

  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::atomic<double> clock_{0};
};

}  // namespace tunableop::toy
