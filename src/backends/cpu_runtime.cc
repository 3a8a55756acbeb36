// The host as a device: memory, copies and the host clock, plus the CPU validator.
#include <cstdlib>
#include <cstring>

#include "backends/cpu_runtime.h"
#include "tunableop/cpu_info.h"

namespace tunableop {

void register_cpu_runtime(Registry& r) {
  DeviceRuntime rt;
  rt.kind = DeviceKind::kCpu;
  rt.alloc = [](size_t bytes) -> StatusOr<void*> {
    // 64-byte alignment: whole cache lines, and legal for every vector load we issue.
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) return Status::internal("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  };
  rt.free = [](void* p) { std::free(p); };
  rt.copy = [](void* dst, const void* src, size_t bytes, DeviceRuntime::Copy, void*) {
    if (bytes > 0) std::memcpy(dst, src, bytes);  // an absent optional operand may be null
    return Status::ok();
  };
  rt.synchronize = [](void*) { return Status::ok(); };
  rt.fill_bytes = [](void* dst, int value, size_t bytes, void*) {
    std::memset(dst, value, bytes);
    return Status::ok();
  };
  rt.make_timer = [](void*) -> std::unique_ptr<Timer> { return std::make_unique<HostTimer>(); };
  rt.last_level_cache_bytes = [] { return cpu_last_level_cache_bytes(); };
  r.add_runtime(std::move(rt));
  r.add_validator({"CPU", [] { return cpu_validator_value(); }, DeviceKind::kCpu});
}

}  // namespace tunableop
