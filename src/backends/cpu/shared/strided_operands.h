// The operands of a provider's gemm, for the CPU BLAS providers: whether the library must be
// called at all, and element pointers into a strided batch (batch b of A starts at element
// b * stride_a of ops.a; likewise B and C).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::cpu_shared {

// For problem `p` (defaults filled in): false when there is nothing to compute (m or n is 0, so C
// is empty), true when the library must be called; invalid_argument "LIBRARY gemm: null operand
// pointer" when C, or A or B with k > 0, is null.
inline StatusOr<bool> needs_call(const GemmParams& p, const GemmOperands& ops, const std::string& library) {
  if (p.m == 0 || p.n == 0) return false;
  if (ops.c == nullptr || (p.k > 0 && (ops.a == nullptr || ops.b == nullptr)))
    return Status::invalid_argument(library + " gemm: null operand pointer");
  return true;
}

// `p` (defaults filled in) with every leading dimension that addresses nothing set to the
// smallest legal value: a matrix with at most one column as stored never steps by its ld, so any
// ld >= its rows is legal, up to 2^63 - 1. The libraries still do arithmetic on it (BLIS faulted
// inside bli_sgemm_ex on n == 1 with ldb near 2^63, found by fuzz/gemm_params_fuzzer), and
// OpenBLAS's 32-bit ints cannot hold it; the tightened problem is the same computation.
inline GemmParams with_unused_lds_tightened(GemmParams p) {
  if (p.a_cols() <= 1) p.lda = std::max<int64_t>(1, p.a_rows());
  if (p.b_cols() <= 1) p.ldb = std::max<int64_t>(1, p.b_rows());
  if (p.n <= 1) p.ldc = std::max<int64_t>(1, p.m);
  return p;
}

// Element `offset` of a typed buffer; a null buffer (k == 0 leaves A and B empty) stays null.
template <class T>
T* at(void* base, int64_t offset) {
  return base ? static_cast<T*>(base) + offset : nullptr;
}
template <class T>
const T* at(const void* base, int64_t offset) {
  return base ? static_cast<const T*>(base) + offset : nullptr;
}
// The same as a non-const pointer, for APIs that take non-const inputs but only read them
// (BLIS's typed API).
template <class T>
T* mutable_at(const void* base, int64_t offset) {
  return const_cast<T*>(at<T>(base, offset));
}

}  // namespace tunableop::cpu_shared
