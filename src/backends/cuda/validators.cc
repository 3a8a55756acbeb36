#include "backends/cuda/validators.h"

#include <fmt/format.h>

#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

// 13000 -> "13.0" (CUDA encodes 1000 * major + 10 * minor).
std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

std::string unknown(const Status& s) { return "unknown (" + s.message() + ")"; }

void add(Registry& r, const char* key, std::function<std::string()> value) {
  ValidatorSource v;
  v.key = key;
  v.value = std::move(value);
  v.device = DeviceKind::kCuda;
  r.add_validator(std::move(v));
}

}  // namespace

void add_cuda_validators(Registry& r) {
  add(r, "CUDA_RUNTIME_VERSION", [] {
    int v = 0;
    return cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : std::string("unknown");
  });
  add(r, "CUDA_DRIVER_VERSION", [] {
    int v = 0;
    return cudaDriverGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : std::string("unknown");
  });
  add(r, "CUBLAS_VERSION", [] {
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
      return std::string("unknown");
    }
    return fmt::format("{}.{}.{}", major, minor, patch);
  });
  add(r, "CUBLASLT_VERSION", [] {
    size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
    return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
  });
  add(r, "GPU_NAME", [] {
    auto info = current_device_info();
    return info.is_ok() ? info->name : unknown(info.status());
  });
  add(r, "GPU_COMPUTE_CAPABILITY", [] {
    auto info = current_device_info();
    return info.is_ok() ? fmt::format("{}.{}", info->cc_major, info->cc_minor) : unknown(info.status());
  });
  add(r, "GPU_SM_COUNT", [] {
    auto info = current_device_info();
    return info.is_ok() ? std::to_string(info->sm_count) : unknown(info.status());
  });
}

}  // namespace tunableop::cuda
