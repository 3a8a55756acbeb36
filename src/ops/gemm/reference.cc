#include "ops/gemm/reference.h"

#include <cmath>
#include <limits>
#include <random>

namespace tunableop {

namespace {

// op(A)(i, l) for batch b.
inline int64_t a_index(const GemmParams& p, int64_t b, int64_t i, int64_t l) {
  return b * p.stride_a + (p.transa == 'N' ? i + l * p.lda : l + i * p.lda);
}
inline int64_t b_index(const GemmParams& p, int64_t b, int64_t l, int64_t j) {
  return b * p.stride_b + (p.transb == 'N' ? l + j * p.ldb : j + l * p.ldb);
}

}  // namespace

std::vector<double> gemm_reference_f64(const GemmParams& p, const void* a, const void* b, const void* c_in,
                                       std::vector<double>* term_scale) {
  std::vector<double> out(size_t(p.c_span()), 0.0);
  if (c_in) {
    for (int64_t i = 0; i < p.c_span(); ++i) out[size_t(i)] = load_as_double(p.c_dtype(), c_in, i);
  }
  if (term_scale) term_scale->assign(size_t(p.c_span()), 0.0);
  std::vector<double> acc(size_t(p.m)), acc2(term_scale ? size_t(p.m) : 0);
  for (int64_t bt = 0; bt < p.batch; ++bt) {
    for (int64_t j = 0; j < p.n; ++j) {
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(acc2.begin(), acc2.end(), 0.0);
      for (int64_t l = 0; l < p.k; ++l) {
        double bv = load_as_double(p.dtype, b, b_index(p, bt, l, j));
        if (bv == 0.0) continue;
        for (int64_t i = 0; i < p.m; ++i) {
          const double t = load_as_double(p.dtype, a, a_index(p, bt, i, l)) * bv;
          acc[size_t(i)] += t;
          if (term_scale) acc2[size_t(i)] += t * t;
        }
      }
      for (int64_t i = 0; i < p.m; ++i) {
        int64_t ci = bt * p.stride_c + i + j * p.ldc;
        double prior = p.beta != 0.0 ? p.beta * load_as_double(p.c_dtype(), c_in, ci) : 0.0;
        out[size_t(ci)] = p.alpha * acc[size_t(i)] + prior;
        if (term_scale) (*term_scale)[size_t(ci)] = std::sqrt(p.alpha * p.alpha * acc2[size_t(i)] + prior * prior);
      }
    }
  }
  return out;
}

double freivalds_error(const GemmParams& p, const void* a, const void* b, const void* c0, const void* c, int vectors,
                       uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> x(size_t(p.n)), bx(size_t(p.k)), bx2(size_t(p.k)), ref(size_t(p.m)), got(size_t(p.m)),
      scale2(size_t(p.m));
  double worst = 0.0;
  for (int64_t bt = 0; bt < p.batch; ++bt) {
    for (int v = 0; v < vectors; ++v) {
      for (auto& e : x) e = dist(rng);
      // bx = op(B) x; bx2 = op(B)^2 x^2 (elementwise squares: the terms' root-sum-square below)
      std::fill(bx.begin(), bx.end(), 0.0);
      std::fill(bx2.begin(), bx2.end(), 0.0);
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t l = 0; l < p.k; ++l) {
          const double t = load_as_double(p.dtype, b, b_index(p, bt, l, j)) * x[size_t(j)];
          bx[size_t(l)] += t;
          bx2[size_t(l)] += t * t;
        }
      // ref = alpha op(A) bx + beta C0 x ; got = C x ; scale2 = the sum of the squares of the terms
      // of ref (alpha a_il b_lj x_j and beta c0_ij x_j)
      std::fill(ref.begin(), ref.end(), 0.0);
      std::fill(scale2.begin(), scale2.end(), 0.0);
      for (int64_t l = 0; l < p.k; ++l)
        for (int64_t i = 0; i < p.m; ++i) {
          const double av = load_as_double(p.dtype, a, a_index(p, bt, i, l));
          ref[size_t(i)] += av * bx[size_t(l)];
          scale2[size_t(i)] += av * av * bx2[size_t(l)];
        }
      for (auto& e : ref) e *= p.alpha;
      for (auto& e : scale2) e *= p.alpha * p.alpha;
      std::fill(got.begin(), got.end(), 0.0);
      for (int64_t j = 0; j < p.n; ++j) {
        for (int64_t i = 0; i < p.m; ++i) {
          int64_t ci = bt * p.stride_c + i + j * p.ldc;
          double cv = load_as_double(p.c_dtype(), c, ci);
          if (!std::isfinite(cv)) return std::numeric_limits<double>::infinity();
          got[size_t(i)] += cv * x[size_t(j)];
          if (p.beta != 0.0) {
            const double t = p.beta * load_as_double(p.c_dtype(), c0, ci) * x[size_t(j)];
            ref[size_t(i)] += t;
            scale2[size_t(i)] += t * t;
          }
        }
      }
      double num = 0, den = 0, den_terms = 0;
      for (int64_t i = 0; i < p.m; ++i) {
        double d = got[size_t(i)] - ref[size_t(i)];
        num += d * d;
        den += ref[size_t(i)] * ref[size_t(i)];
        den_terms += scale2[size_t(i)];
      }
      double err = std::sqrt(num) / std::max(std::sqrt(std::max(den, den_terms)), 1e-300);
      if (!std::isfinite(err)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, err);
    }
  }
  return worst;
}

double relative_error(const GemmParams& p, const void* c, const std::vector<double>& ref) {
  return ops::layout_error({0, p.c_dtype(), p.m, p.n, p.ldc, p.batch, p.stride_c}, c, ref);
}

double relative_error(const GemmParams& p, const void* c, const std::vector<double>& ref,
                      const std::vector<double>& term_scale) {
  return ops::layout_error({0, p.c_dtype(), p.m, p.n, p.ldc, p.batch, p.stride_c}, c, ref, &term_scale);
}

double gemm_tolerance(const GemmParams& p) {
  // Unit roundoff of C's storage type (the output is rounded to it) plus accumulation error
  // growing like sqrt(k) in the accumulation type; a wrong kernel is off by O(1).
  double store_eps = 0, acc_eps = 0;
  switch (p.c_dtype()) {
    case DType::kF64: store_eps = acc_eps = 1.1e-16; break;
    case DType::kF32: store_eps = acc_eps = 6e-8; break;
    case DType::kBF16:
      store_eps = 3.9e-3;
      acc_eps = 6e-8;
      break;
    case DType::kF16:
      store_eps = 4.9e-4;
      acc_eps = 6e-8;
      break;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // never a GEMM's C (validate refuses fp8)
  }
  if (p.dtype == DType::kF32 && p.allow_tf32) acc_eps = 4.9e-4;  // tf32 inputs: 10-bit mantissa
  double k = double(std::max<int64_t>(p.k, 1));
  return 8.0 * store_eps + 16.0 * acc_eps * std::sqrt(k);
}

}  // namespace tunableop
