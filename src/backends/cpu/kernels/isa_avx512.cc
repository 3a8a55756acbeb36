// AVX-512F kernels. This file alone is compiled with -mavx512f -mfma -mf16c (see CMakeLists.txt) and is
// reached only through avx512_kernels(), which callers use after checking the CPU.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_table_impl.h"

namespace tunableop::cpu_kernels {
namespace {

// bf16 is the top half of an fp32; the shift needs no rounding. fp16 goes through vcvtph2ps.
inline float bf16_bits_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

struct F32x16 {
  using T = float;
  using R = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kRegs = 32;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static R load(const bf16* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static R load(const fp16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static R broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static float reduce(R v) { return _mm512_reduce_add_ps(v); }
  static float scalar(float v) { return v; }
  static float scalar(bf16 v) { return bf16_bits_to_float(v.bits); }
  static float scalar(fp16 v) { return _cvtsh_ss(v.bits); }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  // r[i] becomes column i of the 16 x 16 matrix whose rows were r[0..15]: interleave 32-bit and
  // 64-bit pairs inside 128-bit lanes, then gather the lanes with two rounds of shuffle_f32x4.
  static void transpose(R* r) {
    R t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + e], lane L: element 4L + e of rows 4g .. 4g + 3.
    for (int g = 0; g < 4; ++g) {
      const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
      const __m512d c = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
      u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
      u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int e = 0; e < 4; ++e) {
      const R v0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), v1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
      const R w0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88),
              w1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
      r[e] = _mm512_shuffle_f32x4(v0, w0, 0x88);
      r[4 + e] = _mm512_shuffle_f32x4(v1, w1, 0x88);
      r[8 + e] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
      r[12 + e] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
    }
  }
};

struct F64x8 {
  using T = double;
  using R = __m512d;
  static constexpr int kWidth = 8;
  static constexpr int kRegs = 32;
  static R zero() { return _mm512_setzero_pd(); }
  static R load(const double* p) { return _mm512_loadu_pd(p); }
  static R broadcast(const double* p) { return _mm512_set1_pd(*p); }
  static R set1(double v) { return _mm512_set1_pd(v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_pd(a, b); }
  static R add(R a, R b) { return _mm512_add_pd(a, b); }
  static void store(double* p, R v) { _mm512_storeu_pd(p, v); }
  static double reduce(R v) { return _mm512_reduce_add_pd(v); }
  static double scalar(double v) { return v; }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  // 8 x 8 in place, as F32x16::transpose with one interleave round fewer.
  static void transpose(R* r) {
    R t[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
    }
    // t[2g + h], lane L: element 2L + h of rows 2g, 2g + 1.
    for (int h = 0; h < 2; ++h) {
      const R v0 = _mm512_shuffle_f64x2(t[h], t[2 + h], 0x88), v1 = _mm512_shuffle_f64x2(t[h], t[2 + h], 0xdd);
      const R w0 = _mm512_shuffle_f64x2(t[4 + h], t[6 + h], 0x88), w1 = _mm512_shuffle_f64x2(t[4 + h], t[6 + h], 0xdd);
      r[h] = _mm512_shuffle_f64x2(v0, w0, 0x88);
      r[2 + h] = _mm512_shuffle_f64x2(v1, w1, 0x88);
      r[4 + h] = _mm512_shuffle_f64x2(v0, w0, 0xdd);
      r[6 + h] = _mm512_shuffle_f64x2(v1, w1, 0xdd);
    }
  }
};

// 32 x 12 (fp32) and 16 x 12 (fp64): 24 accumulators + 2 A vectors + 1 broadcast of 32 zmm.
constexpr int kMv = 2;
constexpr int kNr = 12;

}  // namespace

const IsaKernels& avx512_kernels() {
  static const IsaKernels k = [] {
    IsaKernels t;
    t.isa = Isa::kAvx512;
    t.for_f32 = make_type_kernels<float, F32x16, kMv, kNr>();
    t.for_f64 = make_type_kernels<double, F64x8, kMv, kNr>();
    t.for_bf16 = make_type_kernels<bf16, F32x16, kMv, kNr>();
    t.for_fp16 = make_type_kernels<fp16, F32x16, kMv, kNr>();
    return t;
  }();
  return k;
}

}  // namespace tunableop::cpu_kernels
