// The vocabulary every layer shares: element types and device kinds. Core, ops, backends and
// the engine all speak it, so it lives at the bottom (core), not in any op's header.
#pragma once

#include <cstddef>
#include <string>

#include "tunableop/status.h"

namespace tunableop {

// Element types of operands. The order is part of the ABI of device kernels that take a dtype
// code (fp32 0, fp64 1, bf16 2, fp16 3); append new types at the end.
enum class DType { kF32, kF64, kBF16, kF16 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);                    // "fp32", "fp64", "bf16", "fp16" (CLI names)
const char* dtype_torch_name(DType t);              // "float", "double", "BFloat16", "Half" (signatures)
StatusOr<DType> parse_dtype(const std::string& s);  // accepts both name sets

enum class DeviceKind { kCpu, kCuda };
const char* device_kind_name(DeviceKind k);  // "cpu", "cuda"

}  // namespace tunableop
