// The engine's fp8 scale rule (--dtype fp8; docs/llm.md, "FP8"), one definition for the host and
// the CUDA kernels. A row (a weight's output channel, an activation's token) is stored as e4m3
// values q with one fp32 scale: x ~= q * scale, q = x / scale rounded to nearest even and
// saturated to +-448 (CUDA's __NV_SATFINITE; tunableop/fp8.h on the host).
//   scale = amax / 448 (amax the row's largest magnitude): amax lands on 448 exactly and every
//           element's relative error is at most 2^-4 (e4m3's unit roundoff) down to the type's
//           smallest normal (2^-6 * scale), an absolute 2^-10 * scale below it;
//   an all-zero row: scale 1 (q all zero);
//   a tiny amax: at least FLT_MIN, so that x / scale never divides by zero;
//   a row with a NaN or an infinity: scale NaN, so the row's GEMM output is NaN: a non-finite
//           activation stays visible instead of being quantized into plausible numbers. The
//           weights never get there: the loader refuses a non-finite weight, naming it.
// As quantize_fp8 (tunableop/scaled_gemm.h) for finite rows, which the tests hold the kernels to.
#pragma once

#include <cfloat>
#include <limits>

#if defined(__CUDACC__)
#define TUNABLEOP_FP8_HD __host__ __device__
#else
#define TUNABLEOP_FP8_HD
#endif

namespace tunableop::llm {

inline constexpr float kE4M3Max = 448.0f;

// `finite`: every element of the row was finite.
TUNABLEOP_FP8_HD inline float fp8_row_scale(float amax, bool finite) {
  if (!finite) {
#if defined(__CUDA_ARCH__)
    return __int_as_float(0x7fc00000);
#else
    return std::numeric_limits<float>::quiet_NaN();
#endif
  }
  if (!(amax > 0.0f)) return 1.0f;
  const float s = amax / kE4M3Max;
  return s < FLT_MIN ? FLT_MIN : s;
}

}  // namespace tunableop::llm
