// The register-tiled micro-kernel, written once over a small "vector traits" type V and
// instantiated by each ISA file (isa_*.cc) with its own traits and compile flags.
//
// Include this only from an ISA translation unit: everything here has internal linkage, so no
// AVX-512-compiled copy of an inline function can be picked by the linker for code that runs
// on an older CPU.
//
// V provides: T (element), R (register), kWidth (elements per R), zero(), load(const T*),
// broadcast(const T*), set1(T), fma(a, b, c) = a*b + c, mul(a, b), store(T*, R),
// prefetch(const void*).
#pragma once

#include <cstdint>

namespace tunableop::cpu_kernels {
namespace {

// MV registers down a column of the tile (mr = MV * kWidth) times NR columns: MV * NR
// accumulators that never leave registers during the k loop. Each step loads MV vectors of the
// packed A sliver and broadcasts NR scalars of the packed B sliver, so loads per FMA stay at
// (MV + NR) / (MV * NR): low enough for two FMA pipes to stay busy from L1.
template <class V, int MV, int NR>
void micro_kernel(int64_t kc, const typename V::T* __restrict a, const typename V::T* __restrict b,
                  typename V::T* __restrict c, int64_t ldc, typename V::T alpha, typename V::T beta) {
  using T = typename V::T;
  using R = typename V::R;
  constexpr int W = V::kWidth;
  constexpr int MR = MV * W;
  // How far ahead (in k steps) to prefetch A: the A sliver streams from L2, B stays in L1.
  constexpr int kPrefetchSteps = 8;

  R acc[NR][MV];
#pragma GCC unroll 32
  for (int j = 0; j < NR; ++j) {
#pragma GCC unroll 8
    for (int i = 0; i < MV; ++i) acc[j][i] = V::zero();
  }
  // Pull the C tile towards L1 while the k loop runs; it is needed only at the end.
#pragma GCC unroll 32
  for (int j = 0; j < NR; ++j) {
    V::prefetch(c + j * ldc);
    V::prefetch(c + j * ldc + MR - 1);
  }
#if defined(__GNUC__)
  // Without this the compiler keeps the NR column addresses of C (computed for the prefetches)
  // alive through the k loop and runs out of registers for the accumulators.
  __asm__("" : "+r"(c), "+r"(ldc));
#endif

#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 4
    for (int q = 0; q < int(MR * sizeof(T)); q += 64)
      V::prefetch(reinterpret_cast<const char*>(a + kPrefetchSteps * MR) + q);
    R av[MV];
#pragma GCC unroll 8
    for (int i = 0; i < MV; ++i) av[i] = V::load(a + i * W);
#pragma GCC unroll 32
    for (int j = 0; j < NR; ++j) {
      R bj = V::broadcast(b + j);
#pragma GCC unroll 8
      for (int i = 0; i < MV; ++i) acc[j][i] = V::fma(av[i], bj, acc[j][i]);
    }
    a += MR;
    b += NR;
  }

  const R va = V::set1(alpha);
  if (beta == T(0)) {
#pragma GCC unroll 32
    for (int j = 0; j < NR; ++j) {
#pragma GCC unroll 8
      for (int i = 0; i < MV; ++i) V::store(c + j * ldc + i * W, V::mul(acc[j][i], va));
    }
  } else if (beta == T(1)) {  // every k block after the first one lands here
#pragma GCC unroll 32
    for (int j = 0; j < NR; ++j) {
#pragma GCC unroll 8
      for (int i = 0; i < MV; ++i) {
        T* cp = c + j * ldc + i * W;
        V::store(cp, V::fma(acc[j][i], va, V::load(cp)));
      }
    }
  } else {
    const R vb = V::set1(beta);
#pragma GCC unroll 32
    for (int j = 0; j < NR; ++j) {
#pragma GCC unroll 8
      for (int i = 0; i < MV; ++i) {
        T* cp = c + j * ldc + i * W;
        V::store(cp, V::fma(acc[j][i], va, V::mul(V::load(cp), vb)));
      }
    }
  }
}

}  // namespace
}  // namespace tunableop::cpu_kernels
