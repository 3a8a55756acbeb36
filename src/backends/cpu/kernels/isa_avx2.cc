// AVX2 + FMA (+ F16C for fp16) kernels. This file alone is compiled with -mavx2 -mfma -mf16c
// (see CMakeLists.txt) and is reached only through avx2_kernels(), after the CPU check.
#include <immintrin.h>

#include "backends/cpu/kernels/isa_table_impl.h"

namespace tunableop::cpu_kernels {
namespace {

inline float bf16_bits_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

struct F32x8 {
  using T = float;
  using R = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kRegs = 16;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static R load(const bf16* p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static R load(const fp16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static R broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static float reduce(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float scalar(float v) { return v; }
  static float scalar(bf16 v) { return bf16_bits_to_float(v.bits); }
  static float scalar(fp16 v) { return _cvtsh_ss(v.bits); }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  // 8 x 8 in place: interleave 32-bit and 64-bit pairs inside 128-bit lanes, then swap lanes.
  static void transpose(R* r) {
    R t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + e], lane L: element 4L + e of rows 4g .. 4g + 3.
    for (int g = 0; g < 2; ++g) {
      const __m256d a = _mm256_castps_pd(t[4 * g]), b = _mm256_castps_pd(t[4 * g + 2]);
      const __m256d c = _mm256_castps_pd(t[4 * g + 1]), d = _mm256_castps_pd(t[4 * g + 3]);
      u[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
      u[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
      u[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(c, d));
      u[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(c, d));
    }
    for (int e = 0; e < 4; ++e) {
      r[e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x20);
      r[4 + e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x31);
    }
  }
};

struct F64x4 {
  using T = double;
  using R = __m256d;
  static constexpr int kWidth = 4;
  static constexpr int kRegs = 16;
  static R zero() { return _mm256_setzero_pd(); }
  static R load(const double* p) { return _mm256_loadu_pd(p); }
  static R broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static R set1(double v) { return _mm256_set1_pd(v); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
  static R add(R a, R b) { return _mm256_add_pd(a, b); }
  static void store(double* p, R v) { _mm256_storeu_pd(p, v); }
  static double reduce(R v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
  static double scalar(double v) { return v; }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  // 4 x 4 in place.
  static void transpose(R* r) {
    const R t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const R t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
  }
};

// 16 x 6 (fp32) and 8 x 6 (fp64): 12 accumulators + 2 A vectors + 1 broadcast of 16 ymm.
constexpr int kMv = 2;
constexpr int kNr = 6;

}  // namespace

const IsaKernels& avx2_kernels() {
  static const IsaKernels k = [] {
    IsaKernels t;
    t.isa = Isa::kAvx2;
    t.for_f32 = make_type_kernels<float, F32x8, kMv, kNr>();
    t.for_f64 = make_type_kernels<double, F64x4, kMv, kNr>();
    t.for_bf16 = make_type_kernels<bf16, F32x8, kMv, kNr>();
    t.for_fp16 = make_type_kernels<fp16, F32x8, kMv, kNr>();
    return t;
  }();
  return k;
}

}  // namespace tunableop::cpu_kernels
