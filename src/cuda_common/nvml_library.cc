#include "cuda_common/nvml_library.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

namespace tunableop::cuda {

namespace {

// NVML's C interface as far as it is used here, declared from its public documentation (the
// CUDA toolkit does not always ship nvml.h): opaque device handles, int return codes (0 is
// NVML_SUCCESS), clock type 1 is NVML_CLOCK_SM.
struct NvmlDeviceSt;
using NvmlDevice = NvmlDeviceSt*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
// Clock event (throttle) reasons that mean a limit holds the clock: software power cap (0x4),
// hardware slowdown (0x8), software and hardware thermal slowdown (0x20, 0x40), power brake
// (0x80). Idle (0x1) and the applications clocks setting (0x2) are not limits of load.
constexpr unsigned long long kLimitReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

}  // namespace

struct NvmlApi {
  int (*init)() = nullptr;
  int (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*clock_info)(NvmlDevice, int, unsigned int*) = nullptr;
  int (*power_usage)(NvmlDevice, unsigned int*) = nullptr;          // milliwatts
  int (*clock_reasons)(NvmlDevice, unsigned long long*) = nullptr;  // optional
  std::string path;
};

StatusOr<const NvmlApi*> open_nvml(const std::vector<std::string>& paths) {
  std::string tried;
  for (const auto& p : paths) {
    void* handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + p + ": " + (why ? why : "not found");
      continue;
    }
    auto api = std::make_unique<NvmlApi>();
    api->path = p;
    auto bind = [&](const char* name, auto& fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      return fn != nullptr;
    };
    const bool ok =
        bind("nvmlInit_v2", api->init) && bind("nvmlDeviceGetHandleByPciBusId_v2", api->handle_by_pci_bus_id) &&
        bind("nvmlDeviceGetClockInfo", api->clock_info) && bind("nvmlDeviceGetPowerUsage", api->power_usage);
    // The reasons' newer name first (NVML 12.2 renamed "throttle" to "event").
    if (!bind("nvmlDeviceGetCurrentClocksEventReasons", api->clock_reasons))
      bind("nvmlDeviceGetCurrentClocksThrottleReasons", api->clock_reasons);
    if (!ok) {
      tried += (tried.empty() ? "" : "; ") + p + ": lacks the NVML entry points used";
      continue;  // the handle stays open: harmless, and another thread may hold its symbols
    }
    if (int rc = api->init(); rc != kNvmlSuccess) {
      tried += (tried.empty() ? "" : "; ") + p + ": nvmlInit_v2 returned " + std::to_string(rc);
      continue;
    }
    return api.release();  // lives as long as the process, as the library does
  }
  return Status::unsupported("NVML not loaded (" + (tried.empty() ? std::string("no path given") : tried) + ")");
}

StatusOr<const NvmlApi*> nvml_api() {
  static const StatusOr<const NvmlApi*> api = [] {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("TUNABLEOP_NVML_LIBRARY"); env && *env) paths.emplace_back(env);
    paths.emplace_back("libnvidia-ml.so.1");
    return open_nvml(paths);
  }();
  return api;
}

DeviceClock read_clock(const NvmlApi& api, const std::string& pci_bus_id) {
  DeviceClock c;
  NvmlDevice dev = nullptr;
  if (api.handle_by_pci_bus_id(pci_bus_id.c_str(), &dev) != kNvmlSuccess || !dev) return c;
  unsigned int mhz = 0, mw = 0;
  if (api.clock_info(dev, kNvmlClockSm, &mhz) == kNvmlSuccess) c.sm_mhz = double(mhz);
  if (api.power_usage(dev, &mw) == kNvmlSuccess) c.power_w = double(mw) / 1000.0;
  unsigned long long reasons = 0;
  if (api.clock_reasons && api.clock_reasons(dev, &reasons) == kNvmlSuccess) c.limited = (reasons & kLimitReasons) != 0;
  return c;
}

DeviceClock read_device_clock(int ordinal) {
  auto api = nvml_api();
  if (!api.is_ok()) return {};
  // The PCI bus id of each CUDA ordinal, asked once ("" when the runtime cannot say).
  static std::mutex mu;
  static std::map<int, std::string> bus_ids;
  std::string bus;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = bus_ids.find(ordinal);
    if (it == bus_ids.end()) {
      char buf[32] = {0};
      if (cudaDeviceGetPCIBusId(buf, sizeof(buf), ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        buf[0] = 0;
      }
      it = bus_ids.emplace(ordinal, buf).first;
    }
    bus = it->second;
  }
  if (bus.empty()) return {};
  return read_clock(**api, bus);
}

}  // namespace tunableop::cuda
