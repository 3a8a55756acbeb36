// Where an operation runs. A context is bound to one device.
#pragma once

#include <string>

#include "tunableop/types.h"

namespace tunableop {

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;  // CUDA device index; 0 for the CPU

  static Device cpu() { return {DeviceKind::kCpu, 0}; }
  static Device cuda(int ordinal = 0) { return {DeviceKind::kCuda, ordinal}; }
  bool operator==(const Device&) const = default;
  std::string to_string() const { return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(ordinal); }
};

}  // namespace tunableop
