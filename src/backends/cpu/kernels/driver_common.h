// Pieces shared by the blocked and skinny drivers: argument checks, per-thread scratch,
// threading without touching the caller's OpenMP settings, and dtype conversions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "backends/cpu/kernels/cpu_features.h"
#include "backends/cpu/kernels/kernel_table.h"
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

// What every kernel entry point does before its own work: validate, find the ISA's kernels,
// handle the trivial cases (empty C; k == 0 or alpha == 0 only scale C), then call
// run(T{}, params, kernels) with the dtype's element type T.
template <class Run>
Status run_gemm_entry(const GemmParams& params, const GemmOperands& ops, Isa isa, const char* what, Run&& run) {
  auto checked = check_gemm_args(params, ops);
  if (!checked.is_ok()) return checked.status();
  const GemmParams& p = checked.value();
  const IsaKernels* kt = kernels_for(isa);
  if (kt == nullptr) return Status::unsupported(std::string(what) + ": " + isa_name(isa) + " not available");
  if (p.m == 0 || p.n == 0) return Status::ok();
  if (p.k == 0 || p.alpha == 0.0) {
    scale_c(p, ops.c);
    return Status::ok();
  }
  switch (p.dtype) {
    case DType::kF32: return run(float{}, p, *kt);
    case DType::kF64: return run(double{}, p, *kt);
    case DType::kBF16: return run(bf16{}, p, *kt);
    case DType::kF16: return run(fp16{}, p, *kt);
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;
  }
  return Status::invalid_argument(std::string(what) + ": no GEMM kernel for " + dtype_name(p.dtype));
}

}  // namespace tunableop::cpu_kernels
