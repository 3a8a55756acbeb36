// bf16 / fp16 storage types for host code (bit patterns; arithmetic goes through float).
#pragma once

#include <cstdint>
#include <cstring>

namespace tunableop {

struct bf16 {
  uint16_t bits = 0;
};
struct fp16 {
  uint16_t bits = 0;
};

inline float to_float(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

inline float to_float(fp16 h) {
  uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t man = h.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while ((man & 0x400u) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, overflow to inf, underflow through subnormals.
inline fp16 to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return fp16{uint16_t(sign | 0x7e00u)};
  if (a >= 0x477ff000u) return fp16{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520
  if (a < 0x38800000u) {                                        // below 2^-14: subnormal or zero
    if (a < 0x33000000u) return fp16{sign};
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    // value = man * 2^(e - 150); the fp16 subnormal unit is 2^-24, so drop 126 - e bits.
    uint32_t drop = 126u - (a >> 23);
    uint32_t r = man >> drop;
    uint32_t rem = man & ((1u << drop) - 1);
    uint32_t half = 1u << (drop - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return fp16{uint16_t(sign | r)};
  }
  uint32_t r = ((a >> 13) - (112u << 10));
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return fp16{uint16_t(sign | r)};
}

}  // namespace tunableop
