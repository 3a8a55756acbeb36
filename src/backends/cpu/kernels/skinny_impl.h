// Skinny (small n) kernels, written once over vector traits V like micro_kernel_impl.h (same
// rule: include only from an ISA translation unit). Besides micro_kernel_impl.h's traits they
// use: kRegs (architectural vector registers), load(const Tin*) for every input type (converting
// to T), reduce(R) -> T (horizontal sum) and scalar(Tin) -> T.
//
// Why a separate path: with n of 1..8 a GEMM is a few matrix-vector products. It is bound by
// reading A once from memory, so packing A (an extra read and write of all of it) would double
// the cost, and a register tile NR columns wide would be mostly padding.
#pragma once

#include <cstdint>

namespace tunableop::cpu_kernels {
namespace {

// IB rows of op(A) (contiguous in memory) against JB columns of x: IB*JB vector accumulators,
// reduced once at the end.
template <class V, class Tin, int IB, int JB>
void dot_tile(int64_t k, const Tin* a, int64_t lda, const typename V::T* x, int64_t ldx, typename V::T* y,
              int64_t ldy) {
  using T = typename V::T;
  using R = typename V::R;
  constexpr int W = V::kWidth;
  R acc[IB][JB];
#pragma GCC unroll 8
  for (int i = 0; i < IB; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j) acc[i][j] = V::zero();
  }
  int64_t l = 0;
  for (; l + W <= k; l += W) {
    R xv[JB];
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j) xv[j] = V::load(x + l + j * ldx);
#pragma GCC unroll 8
    for (int i = 0; i < IB; ++i) {
      R av = V::load(a + l + i * lda);
#pragma GCC unroll 8
      for (int j = 0; j < JB; ++j) acc[i][j] = V::fma(av, xv[j], acc[i][j]);
    }
  }
  T s[IB][JB];
  for (int i = 0; i < IB; ++i)
    for (int j = 0; j < JB; ++j) s[i][j] = V::reduce(acc[i][j]);
  for (; l < k; ++l)
    for (int i = 0; i < IB; ++i)
      for (int j = 0; j < JB; ++j) s[i][j] += V::scalar(a[l + i * lda]) * x[l + j * ldx];
  for (int i = 0; i < IB; ++i)
    for (int j = 0; j < JB; ++j) y[i + j * ldy] = s[i][j];
}

// Rows of op(A) against JB columns of x, as many rows at once as fit in the registers next to
// the JB x vectors and one A vector.
template <class V, class Tin, int JB>
constexpr int dot_rows_per_tile() {
  constexpr int kFit = (V::kRegs - JB - 1) / JB;
  return kFit > 8 ? 8 : kFit < 1 ? 1 : kFit;
}

template <class V, class Tin, int IB>
void dot_row_block(int64_t n, int64_t k, const Tin* a, int64_t lda, const typename V::T* x, int64_t ldx,
                   typename V::T* y, int64_t ldy) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) dot_tile<V, Tin, IB, 4>(k, a, lda, x + j * ldx, ldx, y + j * ldy, ldy);
  switch (n - j) {
    case 3: dot_tile<V, Tin, IB, 3>(k, a, lda, x + j * ldx, ldx, y + j * ldy, ldy); break;
    case 2: dot_tile<V, Tin, IB, 2>(k, a, lda, x + j * ldx, ldx, y + j * ldy, ldy); break;
    case 1: dot_tile<V, Tin, IB, 1>(k, a, lda, x + j * ldx, ldx, y + j * ldy, ldy); break;
    default: break;
  }
}

// op(A)(i, l) = a[l + i*lda]: each output is a dot product of a contiguous row with x. A block of
// rows meets every column of x before the next block is read, so A streams from memory once
// (later column groups find the rows in L2) however many columns there are.
template <class V, class Tin>
void skinny_dot(int64_t m, int64_t n, int64_t k, const Tin* a, int64_t lda, const typename V::T* x, int64_t ldx,
                typename V::T* y, int64_t ldy) {
  // Rows per block: sized for 4 columns of x (the common group), or for one when n == 1.
  constexpr int IB4 = dot_rows_per_tile<V, Tin, 4>();
  constexpr int IB1 = dot_rows_per_tile<V, Tin, 1>();
  int64_t i = 0;
  if (n == 1) {
    for (; i + IB1 <= m; i += IB1) dot_tile<V, Tin, IB1, 1>(k, a + i * lda, lda, x, ldx, y + i, ldy);
  } else {
    for (; i + IB4 <= m; i += IB4) dot_row_block<V, Tin, IB4>(n, k, a + i * lda, lda, x, ldx, y + i, ldy);
  }
  for (; i < m; ++i) dot_row_block<V, Tin, 1>(n, k, a + i * lda, lda, x, ldx, y + i, ldy);
}

// op(A)(i, l) = a[i + l*lda]: y columns are sums of scaled A columns. Rows go in chunks small
// enough that the chunk of y stays in L1 while four A columns stream past it; each A vector is
// loaded (and converted) once for all n outputs.
template <class V, class Tin>
void skinny_axpy(int64_t m, int64_t n, int64_t k, const Tin* a, int64_t lda, const typename V::T* x, int64_t ldx,
                 typename V::T* y, int64_t ldy) {
  using T = typename V::T;
  using R = typename V::R;
  constexpr int W = V::kWidth;
  constexpr int64_t kChunk = 512;  // rows; a multiple of every W
  constexpr int kMaxN = 16;        // callers keep n small; larger n loops over column groups
  for (int64_t j0 = 0; j0 < n; j0 += kMaxN) {
    const int nb = int(n - j0 < kMaxN ? n - j0 : kMaxN);
    const T* xj = x + j0 * ldx;
    T* yj = y + j0 * ldy;
    for (int64_t i0 = 0; i0 < m; i0 += kChunk) {
      const int64_t ib = m - i0 < kChunk ? m - i0 : kChunk;
      const int64_t iv = ib / W * W;
      for (int j = 0; j < nb; ++j)
        for (int64_t i = 0; i < ib; ++i) yj[i0 + i + j * ldy] = T(0);
      int64_t l = 0;
      for (; l + 4 <= k; l += 4) {
        const Tin* a0 = a + i0 + l * lda;
        T xs[kMaxN][4];
        for (int j = 0; j < nb; ++j)
          for (int q = 0; q < 4; ++q) xs[j][q] = xj[l + q + j * ldx];
        for (int64_t i = 0; i < iv; i += W) {
          const R v0 = V::load(a0 + i), v1 = V::load(a0 + lda + i);
          const R v2 = V::load(a0 + 2 * lda + i), v3 = V::load(a0 + 3 * lda + i);
          for (int j = 0; j < nb; ++j) {
            T* yp = yj + i0 + i + j * ldy;
            R s0 = V::fma(v0, V::broadcast(&xs[j][0]), V::load(yp));
            R s1 = V::mul(v1, V::broadcast(&xs[j][1]));
            s0 = V::fma(v2, V::broadcast(&xs[j][2]), s0);
            s1 = V::fma(v3, V::broadcast(&xs[j][3]), s1);
            V::store(yp, V::add(s0, s1));
          }
        }
        for (int64_t i = iv; i < ib; ++i)
          for (int j = 0; j < nb; ++j)
            yj[i0 + i + j * ldy] += V::scalar(a0[i]) * xs[j][0] + V::scalar(a0[lda + i]) * xs[j][1] +
                                    V::scalar(a0[2 * lda + i]) * xs[j][2] + V::scalar(a0[3 * lda + i]) * xs[j][3];
      }
      for (; l < k; ++l) {
        const Tin* a0 = a + i0 + l * lda;
        for (int j = 0; j < nb; ++j) {
          const T xv = xj[l + j * ldx];
          T* yp = yj + i0 + j * ldy;
          int64_t i = 0;
          for (; i < iv; i += W) V::store(yp + i, V::fma(V::load(a0 + i), V::set1(xv), V::load(yp + i)));
          for (; i < ib; ++i) yp[i] += V::scalar(a0[i]) * xv;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tunableop::cpu_kernels
