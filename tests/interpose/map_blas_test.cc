// CBLAS / Fortran BLAS calls -> our GEMM problem, checked against a naive implementation of the
// BLAS definition: row- and column-major, every transpose, ld > rows, beta 0 and not.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "interpose/map_blas.h"
#include "ops/gemm/reference.h"

namespace tunableop::interpose {
namespace {

constexpr int kRow = 101, kCol = 102, kN = 111, kT = 112, kC = 113;

// One BLAS call with its own buffers, as the caller lays them out.
struct BlasCase {
  int order, ta, tb, m, n, k, lda, ldb, ldc;
  double alpha, beta;
  std::vector<double> a, b, c;  // c: initial values

  // Element (i, j) of a rows x cols matrix in the caller's order.
  int64_t at(int ld, int i, int j) const { return order == kRow ? int64_t(i) * ld + j : int64_t(j) * ld + i; }
  bool trans_a() const { return ta != kN; }
  bool trans_b() const { return tb != kN; }

  static BlasCase random(int order, int ta, int tb, std::mt19937_64& rng) {
    auto dim = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    BlasCase c{order, ta, tb, dim(1, 37), dim(1, 37), dim(1, 37), 0, 0, 0, 1.5, 0.0, {}, {}, {}};
    const int a_rows = c.trans_a() ? c.k : c.m, a_cols = c.trans_a() ? c.m : c.k;
    const int b_rows = c.trans_b() ? c.n : c.k, b_cols = c.trans_b() ? c.k : c.n;
    const int pad = dim(0, 3);
    // ld counts the stored rows (column-major) or columns (row-major), plus a gap.
    c.lda = (order == kRow ? a_cols : a_rows) + pad;
    c.ldb = (order == kRow ? b_cols : b_rows) + pad;
    c.ldc = (order == kRow ? c.n : c.m) + pad;
    c.beta = dim(0, 1) ? -0.5 : 0.0;
    std::uniform_real_distribution<double> v(-1, 1);
    c.a.assign(size_t(c.lda) * (order == kRow ? a_rows : a_cols), 0);
    c.b.assign(size_t(c.ldb) * (order == kRow ? b_rows : b_cols), 0);
    c.c.assign(size_t(c.ldc) * (order == kRow ? c.m : c.n), 7.0);  // gaps must stay 7
    for (auto& x : c.a) x = v(rng);
    for (auto& x : c.b) x = v(rng);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) c.c[size_t(c.at(c.ldc, i, j))] = v(rng);
    return c;
  }

  // The BLAS definition, element by element, in the caller's layout.
  std::vector<double> expected() const {
    std::vector<double> out = c;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int l = 0; l < k; ++l)
          s += a[size_t(trans_a() ? at(lda, l, i) : at(lda, i, l))] *
               b[size_t(trans_b() ? at(ldb, j, l) : at(ldb, l, j))];
        double& o = out[size_t(at(ldc, i, j))];
        o = alpha * s + (beta != 0 ? beta * o : 0.0);
      }
    return out;
  }

  BlasCall call(Api api) const {
    BlasCall bc;
    bc.api = api;
    bc.order = order;
    bc.transa = ta;
    bc.transb = tb;
    bc.m = m;
    bc.n = n;
    bc.k = k;
    bc.alpha = alpha;
    bc.beta = beta;
    bc.a = a.data();
    bc.lda = lda;
    bc.b = b.data();
    bc.ldb = ldb;
    bc.c = const_cast<double*>(c.data());
    bc.ldc = ldc;
    return bc;
  }
};

// `got` spans C up to its last element (the reference's c_span()); the caller's buffer may be
// longer by the gap after the last column, which no GEMM touches.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_LE(got.size(), want.size());
  ASSERT_GE(got.size() + 3, want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << what << " element " << i;
}

TEST(MapBlasCall, EveryOrderAndTransposeComputesTheBlasDefinition) {
  std::mt19937_64 rng(11);
  for (int order : {kRow, kCol, 0}) {
    for (int ta : {kN, kT, kC}) {
      for (int tb : {kN, kT, kC}) {
        for (int rep = 0; rep < 3; ++rep) {
          BlasCase bc = BlasCase::random(order == 0 ? kCol : order, ta, tb, rng);
          BlasCall call = bc.call(Api::kCblasDgemm);
          if (order == 0) {  // Fortran: characters, column-major
            call.order = 0;
            call.api = Api::kDgemm;
            call.transa = ta == kN ? 'n' : ta == kT ? 'T' : 'c';
            call.transb = tb == kN ? 'N' : tb == kT ? 't' : 'C';
          }
          GemmParams p;
          GemmOperands ops;
          ASSERT_EQ(map_blas_call(call, &p, &ops), Reason::kServed);
          EXPECT_EQ(p.dtype, DType::kF64);
          std::vector<double> got = gemm_reference_f64(p, ops.a, ops.b, bc.c.data());
          expect_close(got, bc.expected(),
                       "order " + std::to_string(order) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb));
        }
      }
    }
  }
}

TEST(MapBlasCall, RowMajorBecomesTheTransposedColumnMajorProblem) {
  // PyTorch/NumPy's y[t, o] = x[t, i] W[o, i]^T is BLAS "tn_<out>_<tokens>_<in>" (the seed's swap).
  static double x[8 * 64], w[32 * 64], y[8 * 32];
  BlasCall call;
  call.api = Api::kCblasSgemm;
  call.order = kRow;
  call.transa = kN;
  call.transb = kT;
  call.m = 8;
  call.n = 32;
  call.k = 64;
  call.alpha = 1;
  call.a = x;
  call.lda = 64;
  call.b = w;
  call.ldb = 64;
  call.c = y;
  call.ldc = 32;
  GemmParams p;
  GemmOperands ops;
  ASSERT_EQ(map_blas_call(call, &p, &ops), Reason::kServed);
  EXPECT_EQ(gemm_params_signature(p), "tn_32_8_64");
  EXPECT_EQ(gemm_op_signature(p), "GemmTunableOp_float_TN");
  EXPECT_EQ(ops.a, w);
  EXPECT_EQ(ops.b, x);
}

TEST(MapBlasCall, WhatIsNotAGemmKernelsJobPassesThrough) {
  std::mt19937_64 rng(3);
  BlasCase bc = BlasCase::random(kCol, kN, kN, rng);
  GemmParams p;
  GemmOperands ops;
  auto with = [&](auto change) {
    BlasCall call = bc.call(Api::kCblasDgemm);
    change(call);
    return map_blas_call(call, &p, &ops);
  };
  EXPECT_EQ(with([](BlasCall& c) { c.m = 0; }), Reason::kTrivial);
  EXPECT_EQ(with([](BlasCall& c) { c.k = 0; }), Reason::kTrivial);
  EXPECT_EQ(with([](BlasCall& c) { c.alpha = 0; }), Reason::kTrivial);  // BLAS never reads A, B then
  EXPECT_EQ(with([](BlasCall& c) { c.order = 7; }), Reason::kInvalidArguments);
  // Order 0 is no CBLAS layout (only the Fortran entry points carry 0, unused): the library
  // rejects it and leaves C untouched, so it is never computed as a Fortran call (issue 33).
  EXPECT_EQ(with([](BlasCall& c) { c.order = 0; }), Reason::kInvalidArguments);
  EXPECT_EQ(with([](BlasCall& c) { c.order = 0, c.transa = 'N', c.transb = 'N'; }), Reason::kInvalidArguments);
  EXPECT_EQ(with([](BlasCall& c) { c.transa = 120; }), Reason::kInvalidArguments);
  EXPECT_EQ(with([](BlasCall& c) { c.n = -1; }), Reason::kInvalidArguments);
  EXPECT_EQ(with([](BlasCall& c) { c.lda = c.m - 1; }), Reason::kInvalidArguments);  // lda < rows
}

}  // namespace
}  // namespace tunableop::interpose
