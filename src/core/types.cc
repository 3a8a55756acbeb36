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
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF64: return "fp64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

const char* dtype_torch_name(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kBF16: return "BFloat16";
    case DType::kF16: return "Half";
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
  return Status::invalid_argument(fmt::format("unknown dtype '{}' (use fp32, fp64, bf16 or fp16)", s));
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
