// Linked from tunableop_core's objects alone: core builds and runs without ops or backends.
// If core referenced any symbol of the layers above it (register_all_backends, an op, a
// backend), this program would not link.
#include <cstdio>

#include "tunableop/context.h"

int main() {
  using namespace tunableop;
  Context ctx(Device::cpu(), Config::defaults_only(), [](Registry&) {});
  const uint64_t g = ctx.generation();
  if (!ctx.config().set(Setting::kEnabled, true).is_ok() || ctx.generation() == g) return 1;
  auto chosen = ctx.choose(
      "Op", "params", [](const std::string&) { return true; },
      []() -> StatusOr<std::unique_ptr<TuningProblem>> { return Status::unsupported("none"); });
  std::printf("core alone: %s\n", chosen.is_ok() ? chosen->c_str() : chosen.status().to_string().c_str());
  return chosen.is_ok() && *chosen == "Default" ? 0 : 1;
}
