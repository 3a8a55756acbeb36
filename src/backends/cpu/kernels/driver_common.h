// Pieces shared by the blocked and skinny drivers: argument checks, per-thread scratch,
// threading without touching the caller's OpenMP settings, and dtype conversions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "tunableop/gemm.h"
#include "tunableop/half.h"
#include "tunableop/status.h"

namespace tunableop::cpu_kernels {

// Copies p with dense ld/stride defaults filled in (the dispatcher normally did that already)
// and trans letters upper-cased, after checking everything the kernels rely on: sizes, ld >=
// rows, C matrices of a batch not overlapping (threads write them concurrently), non-null
// operands whenever they are read or written.
StatusOr<GemmParams> check_gemm_args(const GemmParams& p, const GemmOperands& ops);

// 0 (or less) means every hardware thread.
int resolve_threads(int threads);

// A 64-byte aligned buffer owned by the calling thread, reused across calls and grown on
// demand (allocation per call would page-fault megabytes every time). `slot` tells apart the
// buffers one call needs at once. Returns nullptr when memory runs out.
enum class ScratchSlot { kPackA, kPackB, kAccum, kCount };
void* thread_scratch(ScratchSlot slot, size_t bytes);

// Runs body(i) for i in [0, items) on up to `threads` threads. Uses an OpenMP num_threads
// clause when built with OpenMP (so the caller's omp_set_num_threads stays as it was), plain
// std::threads otherwise.
void parallel_for(int64_t items, int threads, const std::function<void(int64_t)>& body);

// C = beta * C over the whole batch (used when alpha == 0 or k == 0); beta == 0 writes zeros
// without reading C.
void scale_c(const GemmParams& p, void* c);

// fp32 accumulation for everything but fp64.
template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

inline float to_acc(float v) { return v; }
inline double to_acc(double v) { return v; }
inline float to_acc(bf16 v) { return to_float(v); }
inline float to_acc(fp16 v) { return to_float(v); }

template <class T>
T from_acc(AccOf<T> v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return to_bf16(v);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return to_fp16(v);
  } else {
    return v;
  }
}

// C(i, j) = alpha * y(i, j) + beta * C(i, j) for an m x n block; beta == 0 does not read C.
template <class T>
void store_block(int64_t m, int64_t n, const AccOf<T>* y, int64_t ldy, AccOf<T> alpha, AccOf<T> beta, T* c,
                 int64_t ldc) {
  for (int64_t j = 0; j < n; ++j) {
    const AccOf<T>* yj = y + j * ldy;
    T* cj = c + j * ldc;
    if (beta == 0) {
      for (int64_t i = 0; i < m; ++i) cj[i] = from_acc<T>(alpha * yj[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) cj[i] = from_acc<T>(alpha * yj[i] + beta * to_acc(cj[i]));
    }
  }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace tunableop::cpu_kernels
