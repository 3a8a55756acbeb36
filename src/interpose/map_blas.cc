#include "interpose/map_blas.h"

#include <cctype>

namespace tunableop::interpose {

namespace {

constexpr int kRowMajor = 101, kColMajor = 102;
constexpr int kNoTrans = 111, kTrans = 112, kConjTrans = 113;

// 'N' or 'T' (conjugate transpose is transpose for real data); 0 when not a valid code.
char trans_letter(bool fortran, int t) {
  if (fortran) {  // a character
    switch (std::toupper(t)) {
      case 'N': return 'N';
      case 'T':
      case 'C': return 'T';
    }
    return 0;
  }
  switch (t) {
    case kNoTrans: return 'N';
    case kTrans:
    case kConjTrans: return 'T';
  }
  return 0;
}

}  // namespace

Reason map_blas_call(const BlasCall& c, GemmParams* p, GemmOperands* ops) {
  const bool fp64 = c.api == Api::kCblasDgemm || c.api == Api::kDgemm;
  // The entry point says which convention the call uses, never the order argument: a CBLAS call
  // with order 0 is invalid (the library rejects it and leaves C untouched), not a Fortran one.
  const bool fortran = c.api == Api::kSgemm || c.api == Api::kDgemm;
  if (!fortran && c.order != kRowMajor && c.order != kColMajor) return Reason::kInvalidArguments;
  char ta = trans_letter(fortran, c.transa), tb = trans_letter(fortran, c.transb);
  if (ta == 0 || tb == 0 || c.m < 0 || c.n < 0 || c.k < 0) return Reason::kInvalidArguments;
  // BLAS returns at once for an empty C, and scales C without reading A or B when k or alpha is
  // 0 (NaN in A stays out of C): nothing a GEMM kernel would do the same way.
  if (c.m == 0 || c.n == 0 || c.k == 0 || c.alpha == 0.0) return Reason::kTrivial;
  if (c.a == nullptr || c.b == nullptr || c.c == nullptr) return Reason::kInvalidArguments;

  GemmParams q;
  q.dtype = fp64 ? DType::kF64 : DType::kF32;
  q.alpha = c.alpha;
  q.beta = c.beta;
  q.k = c.k;
  q.ldc = c.ldc;
  GemmOperands o;
  o.c = c.c;
  if (!fortran && c.order == kRowMajor) {
    q.transa = tb;
    q.transb = ta;
    q.m = c.n;
    q.n = c.m;
    q.lda = c.ldb;
    q.ldb = c.lda;
    o.a = c.b;
    o.b = c.a;
  } else {
    q.transa = ta;
    q.transb = tb;
    q.m = c.m;
    q.n = c.n;
    q.lda = c.lda;
    q.ldb = c.ldb;
    o.a = c.a;
    o.b = c.b;
  }
  // BLAS checks ld >= max(1, rows) itself and reports through xerbla: leave that to it.
  if (q.lda < 1 || q.ldb < 1 || q.ldc < 1) return Reason::kInvalidArguments;
  q = q.with_defaults();
  if (!q.validate().is_ok()) return Reason::kInvalidArguments;
  *p = q;
  *ops = o;
  return Reason::kServed;
}

}  // namespace tunableop::interpose
