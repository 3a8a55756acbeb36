// Host fp8 quantization (tunableop/scaled_gemm.h): scales that map each row's (or the whole
// matrix's) largest magnitude onto the fp8 type's largest value.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tunableop/fp8.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {

namespace {

Status check_shape(const char* what, DType fp8, int64_t rows, int64_t cols, int64_t ldx, int64_t ldq) {
  if (!is_fp8(fp8))
    return Status::invalid_argument(
        fmt::format("{}: {} is not an fp8 type (fp8_e4m3 or fp8_e5m2)", what, dtype_name(fp8)));
  if (rows < 0 || cols < 0)
    return Status::invalid_argument(fmt::format("{}: rows and cols must be >= 0, got {} and {}", what, rows, cols));
  if (ldx < cols || ldq < cols)
    return Status::invalid_argument(
        fmt::format("{}: the row strides ({} and {}) must be >= cols ({})", what, ldx, ldq, cols));
  return Status::ok();
}

uint8_t encode(DType fp8, float v) { return fp8 == DType::kF8E4M3 ? to_fp8_e4m3(v).bits : to_fp8_e5m2(v).bits; }
float decode(DType fp8, uint8_t b) { return fp8 == DType::kF8E4M3 ? to_float(fp8_e4m3{b}) : to_float(fp8_e5m2{b}); }

}  // namespace

double fp8_max(DType fp8) { return fp8 == DType::kF8E4M3 ? kFp8E4M3Max : fp8 == DType::kF8E5M2 ? kFp8E5M2Max : 0.0; }

double fp8_unit_roundoff(DType fp8) { return fp8 == DType::kF8E4M3 ? 0x1p-4 : fp8 == DType::kF8E5M2 ? 0x1p-3 : 0.0; }

Status quantize_fp8(DType fp8, ScaleMode mode, int64_t rows, int64_t cols, const float* x, int64_t ldx, void* q,
                    int64_t ldq, float* scales) {
  TUNABLEOP_RETURN_IF_ERROR(check_shape("quantize_fp8", fp8, rows, cols, ldx, ldq));
  if (rows == 0 || cols == 0) {
    if (mode == ScaleMode::kTensorwise) scales[0] = 1.0f;
    for (int64_t r = 0; mode == ScaleMode::kRowwise && r < rows; ++r) scales[r] = 1.0f;
    return Status::ok();
  }
  // Amax per row; a non-finite element has no scale.
  std::vector<float> amax(size_t(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * ldx + c];
      if (!std::isfinite(v))
        return Status::invalid_argument(
            fmt::format("quantize_fp8: element [{}, {}] is {}: no fp8 scale represents it", r, c, v));
      amax[size_t(r)] = std::max(amax[size_t(r)], std::fabs(v));
    }
  if (mode == ScaleMode::kTensorwise) std::fill(amax.begin(), amax.end(), *std::max_element(amax.begin(), amax.end()));
  const float top = float(fp8_max(fp8));
  auto* out = static_cast<uint8_t*>(q);
  for (int64_t r = 0; r < rows; ++r) {
    // At least the smallest normal float: a scale that underflowed to 0 would divide by zero.
    const float scale = amax[size_t(r)] > 0 ? std::max(amax[size_t(r)] / top, std::numeric_limits<float>::min()) : 1.0f;
    if (mode == ScaleMode::kRowwise || r == 0) scales[mode == ScaleMode::kRowwise ? r : 0] = scale;
    // Divide rather than multiply by 1/scale: x / scale rounds once, so amax lands on max exactly.
    for (int64_t c = 0; c < cols; ++c) out[r * ldq + c] = encode(fp8, x[r * ldx + c] / scale);
  }
  return Status::ok();
}

Status dequantize_fp8(DType fp8, ScaleMode mode, int64_t rows, int64_t cols, const void* q, int64_t ldq,
                      const float* scales, float* x, int64_t ldx) {
  TUNABLEOP_RETURN_IF_ERROR(check_shape("dequantize_fp8", fp8, rows, cols, ldx, ldq));
  const auto* in = static_cast<const uint8_t*>(q);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = scales[mode == ScaleMode::kRowwise ? r : 0];
    for (int64_t c = 0; c < cols; ++c) x[r * ldx + c] = decode(fp8, in[r * ldq + c]) * scale;
  }
  return Status::ok();
}

}  // namespace tunableop
