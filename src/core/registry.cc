#include "tunableop/registry.h"

namespace tunableop {

const DeviceRuntime* Registry::runtime(DeviceKind kind) const {
  for (const auto& rt : runtimes_)
    if (rt.kind == kind) return &rt;
  return nullptr;
}

}  // namespace tunableop
