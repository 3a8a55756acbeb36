#include "interpose/program_blas.h"

#include <climits>
#include <cstddef>

#include "interpose/engine.h"

namespace tunableop::interpose {

namespace {

using CblasS = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using CblasD = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                        int);
using FortranS = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                          const int*, const float*, const int*, const float*, float*, const int*, size_t, size_t);
using FortranD = void (*)(const char*, const char*, const int*, const int*, const int*, const double*, const double*,
                          const int*, const double*, const int*, const double*, double*, const int*, size_t, size_t);

constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112;

template <class T, class Cblas, class Fortran>
void call(void* cblas, void* fortran, const GemmParams& p, const GemmOperands& o) {
  const int m = int(p.m), n = int(p.n), k = int(p.k), lda = int(p.lda), ldb = int(p.ldb), ldc = int(p.ldc);
  const T alpha = T(p.alpha), beta = T(p.beta);
  const auto* a = static_cast<const T*>(o.a);
  const auto* b = static_cast<const T*>(o.b);
  auto* c = static_cast<T*>(o.c);
  if (cblas) {
    reinterpret_cast<Cblas>(cblas)(kColMajor, p.transa == 'N' ? kNoTrans : kTrans, p.transb == 'N' ? kNoTrans : kTrans,
                                   m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    reinterpret_cast<Fortran>(fortran)(&p.transa, &p.transb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1,
                                       1);
  }
}

}  // namespace

GemmCandidate make_program_blas_candidate(const ProgramBlas& fns) {
  GemmCandidate c;
  c.name = kProgramBlasName;
  c.device = DeviceKind::kCpu;
  c.min_effort = 0;
  c.supports = [fns](const GemmParams& p) -> Status {
    bool have = p.dtype == DType::kF32   ? (fns.cblas_sgemm || fns.sgemm)
                : p.dtype == DType::kF64 ? (fns.cblas_dgemm || fns.dgemm)
                                         : false;
    if (!have) return Status::unsupported("the program's BLAS has no GEMM of this dtype");
    if (p.batch != 1) return Status::unsupported("the program's BLAS GEMM takes one matrix");
    for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc})
      if (v > INT_MAX) return Status::unsupported("dimension exceeds the 32-bit BLAS interface");
    return Status::ok();
  };
  c.run = [fns, supports = c.supports](const GemmParams& p, const GemmOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(supports(p));
    if (p.m == 0 || p.n == 0) return Status::ok();
    if (p.dtype == DType::kF32)
      call<float, CblasS, FortranS>(fns.cblas_sgemm, fns.sgemm, p, o);
    else
      call<double, CblasD, FortranD>(fns.cblas_dgemm, fns.dgemm, p, o);
    return Status::ok();
  };
  return c;
}

}  // namespace tunableop::interpose
