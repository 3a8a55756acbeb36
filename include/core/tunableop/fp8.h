// fp8 storage types for host code (OCP FP8, as CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 and
// PyTorch's Float8_e4m3fn / Float8_e5m2): bit patterns, arithmetic goes through float.
//   e4m3 ("fn": finite, no inf): 4 exponent bits (bias 7), 3 mantissa bits; max 448, smallest
//        normal 2^-6, subnormal step 2^-9; NaN is S.1111.111.
//   e5m2: 5 exponent bits (bias 15), 2 mantissa bits; max 57344, smallest normal 2^-14,
//        subnormal step 2^-16; inf S.11111.00, NaN S.11111.xx.
// Conversion from float rounds to nearest even and saturates to the largest finite value (what
// CUDA's __NV_SATFINITE does and what quantization wants: an outlier becomes max, not NaN or
// inf); NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace tunableop {

struct fp8_e4m3 {
  uint8_t bits = 0;
};
struct fp8_e5m2 {
  uint8_t bits = 0;
};

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

namespace fp8_detail {

// E exponent bits (bias B), M mantissa bits.
template <int E, int M, int B, bool kHasInf>
inline float decode(uint8_t v) {
  const uint32_t sign = uint32_t(v & 0x80u) << 24;
  const uint32_t e = (v >> M) & ((1u << E) - 1);
  const uint32_t m = v & ((1u << M) - 1);
  uint32_t u;
  if (e == (1u << E) - 1 && (kHasInf || m == (1u << M) - 1)) {
    u = sign | 0x7f800000u | (m ? 0x400000u : 0u);  // inf (e5m2, m == 0) or NaN
  } else if (e == 0) {
    // Subnormal: m * 2^(1 - B - M), exact in float.
    float f = float(m) * (1.0f / float(1u << (B + M - 1)));
    return (v & 0x80u) ? -f : f;
  } else {
    u = sign | (e - B + 127) << 23 | m << (23 - M);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <int E, int M, int B>
inline uint8_t encode(float f, uint8_t max_bits, uint8_t nan_bits) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint8_t(sign | nan_bits);
  if (a == 0x7f800000u) return uint8_t(sign | max_bits);  // saturate
  const int fe = int(a >> 23) - 127;                      // float's exponent (-127: zero or subnormal)
  uint32_t r;
  if (fe >= 1 - B) {
    // Normal: round the 23-bit mantissa to M bits; a carry walks into the exponent on its own.
    constexpr uint32_t shift = 23 - M;
    r = a >> shift;
    const uint32_t rem = a & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    r -= uint32_t(127 - B) << M;  // rebias
  } else {
    if (fe == -127) return sign;  // float zero or subnormal: far below fp8's smallest step
    // Subnormal result: value = man * 2^(fe - 23), in units of 2^(1 - B - M).
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const int shift = 24 - B - M - fe;
    if (shift >= 25) return sign;  // below half a step
    r = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may become the smallest normal: same encoding
  }
  if (r > max_bits) r = max_bits;
  return uint8_t(sign | r);
}

}  // namespace fp8_detail

inline float to_float(fp8_e4m3 v) { return fp8_detail::decode<4, 3, 7, false>(v.bits); }
inline float to_float(fp8_e5m2 v) { return fp8_detail::decode<5, 2, 15, true>(v.bits); }
inline fp8_e4m3 to_fp8_e4m3(float f) { return fp8_e4m3{fp8_detail::encode<4, 3, 7>(f, 0x7e, 0x7f)}; }
inline fp8_e5m2 to_fp8_e5m2(float f) { return fp8_e5m2{fp8_detail::encode<5, 2, 15>(f, 0x7b, 0x7f)}; }

}  // namespace tunableop
