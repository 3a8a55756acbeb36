#include "tunableop/types.h"

#include <fmt/format.h>

#include "tunableop/choice.h"

namespace tunableop {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF64: return "fp64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kF8E4M3: return "fp8_e4m3";
    case DType::kF8E5M2: return "fp8_e5m2";
  }
  return "?";
}

const char* dtype_torch_name(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBF16: return "BFloat16";
    case DType::kF16: return "Half";
    case DType::kF8E4M3: return "Float8_e4m3fn";
    case DType::kF8E5M2: return "Float8_e5m2";
  }
  return "?";
}

StatusOr<DType> parse_dtype(const std::string& s) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16})
    if (s == dtype_name(t) || s == dtype_torch_name(t)) return t;
  if (s == "f32" || s == "float32") return DType::kF32;
  if (s == "f64" || s == "float64") return DType::kF64;
  if (s == "bfloat16") return DType::kBF16;
  if (s == "f16" || s == "half" || s == "float16") return DType::kF16;
  if (parse_fp8_dtype(s).is_ok())
    return Status::invalid_argument(
        fmt::format("dtype '{}' is an fp8 type: only ScaledGemm's inputs are fp8 (use fp32, fp64, bf16 or fp16)", s));
  return Status::invalid_argument(fmt::format("unknown dtype '{}' (use fp32, fp64, bf16 or fp16)", s));
}

StatusOr<DType> parse_fp8_dtype(const std::string& s) {
  for (DType t : {DType::kF8E4M3, DType::kF8E5M2})
    if (s == dtype_name(t) || s == dtype_torch_name(t)) return t;
  if (s == "fp8" || s == "e4m3" || s == "fp8_e4m3fn" || s == "float8_e4m3fn") return DType::kF8E4M3;
  if (s == "e5m2" || s == "float8_e5m2") return DType::kF8E5M2;
  return Status::invalid_argument(fmt::format("unknown fp8 dtype '{}' (use fp8_e4m3 or fp8_e5m2)", s));
}

const char* device_kind_name(DeviceKind k) { return k == DeviceKind::kCpu ? "cpu" : "cuda"; }

const char* choice_source_name(ChoiceSource s) {
  switch (s) {
    case ChoiceSource::kDisabled: return "disabled";
    case ChoiceSource::kStored: return "stored";
    case ChoiceSource::kTuned: return "tuned";
    case ChoiceSource::kNotTuned: return "not tuned";
    case ChoiceSource::kDeferred: return "deferred";
    case ChoiceSource::kTuningFailed: return "tuning failed";
    case ChoiceSource::kDidNotFit: return "did not fit";
  }
  return "?";
}

}  // namespace tunableop
