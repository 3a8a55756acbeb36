// The vocabulary every layer shares: element types and device kinds. Core, ops, backends and
// the engine all speak it, so it lives at the bottom (core), not in any op's header.
#pragma once

#include <cstddef>
#include <string>

#include "tunableop/status.h"

namespace tunableop {

// Element types of operands. The order is part of the ABI of device kernels that take a dtype
// code (fp32 0, fp64 1, bf16 2, fp16 3, fp8 e4m3 4, fp8 e5m2 5); append new types at the end.
// The fp8 types (OCP FP8: e4m3 "fn", finite only, max 448; e5m2 with inf, max 57344) are the
// inputs of ScaledGemm (tunableop/scaled_gemm.h) and nothing else: every other op refuses them.
enum class DType { kF32, kF64, kBF16, kF16, kF8E4M3, kF8E5M2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);        // "fp32", "fp64", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2" (CLI names)
const char* dtype_torch_name(DType t);  // "float", "double", "BFloat16", "Half", "Float8_e4m3fn", "Float8_e5m2"
// Accepts both name sets of the four arithmetic types only: an fp8 name is refused with a
// pointer to parse_fp8_dtype, so no caller that computes in a dtype is handed fp8 by accident.
StatusOr<DType> parse_dtype(const std::string& s);
// The fp8 types by either name ("fp8_e4m3" / "Float8_e4m3fn", also "e4m3"; "fp8_e5m2" /
// "Float8_e5m2", also "e5m2").
StatusOr<DType> parse_fp8_dtype(const std::string& s);
inline bool is_fp8(DType t) { return t == DType::kF8E4M3 || t == DType::kF8E5M2; }

enum class DeviceKind { kCpu, kCuda };
const char* device_kind_name(DeviceKind k);  // "cpu", "cuda"

}  // namespace tunableop
