// CBLAS / Fortran BLAS calls -> our column-major GEMM problem, exactly, or the reason why not.
#pragma once

#include "interpose/abi.h"
#include "tunableop/gemm.h"

namespace tunableop::interpose {

// Reason::kServed means "mapped": *p and *ops describe the same computation as the call.
// Row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, with the
// same memory and leading dimensions (A and B swap places, m and n swap).
Reason map_blas_call(const BlasCall& call, GemmParams* p, GemmOperands* ops);

}  // namespace tunableop::interpose
