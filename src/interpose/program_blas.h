// The program's own BLAS as a CPU candidate. On the CPU our Default is our own kernel, not the
// library the program linked (libblas.so.3 may be OpenBLAS, BLIS, MKL or the reference BLAS), so
// the program's library competes like any other candidate: the tuned choice can never be slower
// than what the program had, and when it wins the call goes to it untouched.
#pragma once

#include "tunableop/gemm.h"

namespace tunableop::interpose {

struct ProgramBlas {
  // Column-major calls into the program's library (null: not present).
  void* cblas_sgemm = nullptr;
  void* cblas_dgemm = nullptr;
  void* sgemm = nullptr;  // Fortran sgemm_
  void* dgemm = nullptr;
};

// "Gemm_ProgramBlas": fp32/fp64, one matrix, 32-bit sizes.
GemmCandidate make_program_blas_candidate(const ProgramBlas& fns);

}  // namespace tunableop::interpose
