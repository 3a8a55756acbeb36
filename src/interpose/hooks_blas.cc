// The CBLAS and Fortran BLAS GEMM hooks (NumPy, SciPy and other programs linked to
// libblas.so.3). Declared here with plain ints for the CBLAS enums (same ABI), so that no cblas.h
// of any one vendor is needed.
#include <cstddef>

#include "interpose/preload_state.h"

using tunableop::interpose::Api;
using tunableop::interpose::BlasCall;
using tunableop::interpose::EngineApi;
using tunableop::interpose::Library;
using tunableop::interpose::preload::RealFunction;
using tunableop::interpose::preload::run_hook;

#define TUNABLEOP_HOOK extern "C" __attribute__((visibility("default")))

namespace {

template <class T>
BlasCall cblas_call(Api api, int order, int ta, int tb, int m, int n, int k, T alpha, const T* a, int lda, const T* b,
                    int ldb, T beta, T* c, int ldc) {
  BlasCall call;
  call.api = api;
  call.order = order;
  call.transa = ta;
  call.transb = tb;
  call.m = m;
  call.n = n;
  call.k = k;
  call.alpha = double(alpha);
  call.beta = double(beta);
  call.a = a;
  call.lda = lda;
  call.b = b;
  call.ldb = ldb;
  call.c = c;
  call.ldc = ldc;
  return call;
}

// Fortran passes everything by reference; a null pointer is the library's to report.
template <class T>
bool fortran_call(Api api, const char* ta, const char* tb, const int* m, const int* n, const int* k, const T* alpha,
                  const T* a, const int* lda, const T* b, const int* ldb, const T* beta, T* c, const int* ldc,
                  BlasCall* call) {
  if (!ta || !tb || !m || !n || !k || !alpha || !lda || !ldb || !beta || !ldc) return false;
  *call = cblas_call<T>(api, 0, *ta, *tb, *m, *n, *k, *alpha, a, *lda, b, *ldb, *beta, c, *ldc);
  return true;
}

tunableop::interpose::Outcome invalid() {
  tunableop::interpose::Outcome o;
  o.reason = tunableop::interpose::Reason::kInvalidArguments;
  return o;
}

}  // namespace

TUNABLEOP_HOOK void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                                const float* b, int ldb, float beta, float* c, int ldc) {
  static RealFunction<decltype(&cblas_sgemm)> real(Library::kBlas, "cblas_sgemm");
  auto ask = [&](const EngineApi& e) {
    return e.blas(cblas_call<float>(Api::kCblasSgemm, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  };
  run_hook<0>(real, Api::kCblasSgemm, ask, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

TUNABLEOP_HOOK void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double* a, int lda,
                                const double* b, int ldb, double beta, double* c, int ldc) {
  static RealFunction<decltype(&cblas_dgemm)> real(Library::kBlas, "cblas_dgemm");
  auto ask = [&](const EngineApi& e) {
    return e.blas(cblas_call<double>(Api::kCblasDgemm, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  };
  run_hook<0>(real, Api::kCblasDgemm, ask, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// gfortran appends the lengths of the two character arguments; C callers often leave them out.
// They are forwarded as received and never read.
TUNABLEOP_HOOK void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
                           const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
                           const int* ldc, size_t ta_len, size_t tb_len) {
  static RealFunction<decltype(&sgemm_)> real(Library::kBlas, "sgemm_");
  auto ask = [&](const EngineApi& e) {
    BlasCall call;
    if (!fortran_call<float>(Api::kSgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &call))
      return invalid();
    return e.blas(call);
  };
  run_hook<0>(real, Api::kSgemm, ask, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ta_len, tb_len);
}

TUNABLEOP_HOOK void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
                           const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
                           const double* beta, double* c, const int* ldc, size_t ta_len, size_t tb_len) {
  static RealFunction<decltype(&dgemm_)> real(Library::kBlas, "dgemm_");
  auto ask = [&](const EngineApi& e) {
    BlasCall call;
    if (!fortran_call<double>(Api::kDgemm, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &call))
      return invalid();
    return e.blas(call);
  };
  run_hook<0>(real, Api::kDgemm, ask, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ta_len, tb_len);
}
