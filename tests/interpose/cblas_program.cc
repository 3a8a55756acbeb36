// An ordinary program linked to libblas.so.3, run by run_interposed.py plain, under
// `tunableop run` and with the interposer loaded but disabled. It calls cblas_sgemm/dgemm and
// sgemm_/dgemm_ (row- and column-major, every transpose, ld > rows), checks every result against
// its own fp64 computation of the BLAS definition, and writes the outputs to OUT for the driver to
// compare between runs. Also: a problem repeated from threads, calls that must pass through
// (alpha = 0, k = 0), a forked child that calls BLAS, and calls through its own dlopen handle.
//   interpose_cblas_program OUT       exit 0: all results correct; prints "servable_problems=N"
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine_loaded.h"

extern "C" {
void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
void cblas_dgemm(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*, int);
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*, size_t, size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*, size_t, size_t);
}

namespace {

constexpr int kRow = 101, kCol = 102, kN = 111, kT = 112;

struct Case {
  bool fp64;
  int order, ta, tb, m, n, k, pad;
  double alpha, beta;
  bool fortran = false;
};

template <class T>
struct Buffers {
  int lda, ldb, ldc;
  std::vector<T> a, b, c;
};

int64_t at(int order, int ld, int i, int j) { return order == kRow ? int64_t(i) * ld + j : int64_t(j) * ld + i; }

template <class T>
Buffers<T> make(const Case& cs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> v(-1, 1);
  const int a_rows = cs.ta == kN ? cs.m : cs.k, a_cols = cs.ta == kN ? cs.k : cs.m;
  const int b_rows = cs.tb == kN ? cs.k : cs.n, b_cols = cs.tb == kN ? cs.n : cs.k;
  Buffers<T> b;
  b.lda = (cs.order == kRow ? a_cols : a_rows) + cs.pad;
  b.ldb = (cs.order == kRow ? b_cols : b_rows) + cs.pad;
  b.ldc = (cs.order == kRow ? cs.n : cs.m) + cs.pad;
  b.a.resize(size_t(b.lda) * (cs.order == kRow ? a_rows : a_cols));
  b.b.resize(size_t(b.ldb) * (cs.order == kRow ? b_rows : b_cols));
  b.c.resize(size_t(b.ldc) * (cs.order == kRow ? cs.m : cs.n));
  for (auto& x : b.a) x = T(v(rng));
  for (auto& x : b.b) x = T(v(rng));
  for (auto& x : b.c) x = T(v(rng));
  return b;
}

template <class T>
std::vector<double> expected(const Case& cs, const Buffers<T>& b) {
  std::vector<double> out(b.c.begin(), b.c.end());
  if (cs.m == 0 || cs.n == 0) return out;
  for (int i = 0; i < cs.m; ++i)
    for (int j = 0; j < cs.n; ++j) {
      double s = 0;
      for (int l = 0; l < cs.k; ++l)
        s += double(b.a[size_t(cs.ta == kN ? at(cs.order, b.lda, i, l) : at(cs.order, b.lda, l, i))]) *
             double(b.b[size_t(cs.tb == kN ? at(cs.order, b.ldb, l, j) : at(cs.order, b.ldb, j, l))]);
      double& o = out[size_t(at(cs.order, b.ldc, i, j))];
      o = cs.alpha * s + (cs.beta != 0 ? cs.beta * o : 0.0);
    }
  return out;
}

template <class T>
void call(const Case& cs, Buffers<T>& b) {
  if (cs.fortran) {
    const char ta = cs.ta == kN ? 'N' : 't', tb = cs.tb == kN ? 'n' : 'T';
    const T alpha = T(cs.alpha), beta = T(cs.beta);
    if constexpr (sizeof(T) == 8)
      dgemm_(&ta, &tb, &cs.m, &cs.n, &cs.k, &alpha, b.a.data(), &b.lda, b.b.data(), &b.ldb, &beta, b.c.data(), &b.ldc,
             1, 1);
    else
      sgemm_(&ta, &tb, &cs.m, &cs.n, &cs.k, &alpha, b.a.data(), &b.lda, b.b.data(), &b.ldb, &beta, b.c.data(), &b.ldc,
             1, 1);
  } else if constexpr (sizeof(T) == 8) {
    cblas_dgemm(cs.order, cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, b.a.data(), b.lda, b.b.data(), b.ldb, cs.beta,
                b.c.data(), b.ldc);
  } else {
    cblas_sgemm(cs.order, cs.ta, cs.tb, cs.m, cs.n, cs.k, float(cs.alpha), b.a.data(), b.lda, b.b.data(), b.ldb,
                float(cs.beta), b.c.data(), b.ldc);
  }
}

// Runs one case; appends its output to `out` (count, tolerance, values); false when wrong.
template <class T>
bool run_case(const Case& cs, uint64_t seed, std::ofstream& out, const char* label) {
  Buffers<T> b = make<T>(cs, seed);
  std::vector<double> want = expected(cs, b);
  call(cs, b);
  const double tol = sizeof(T) == 8 ? 1e-12 : 2e-5 * std::sqrt(double(std::max(cs.k, 1)));
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(double(b.c[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  uint64_t count = b.c.size();
  out.write(reinterpret_cast<const char*>(&count), sizeof(count));
  out.write(reinterpret_cast<const char*>(&tol), sizeof(tol));
  for (T x : b.c) {
    double d = double(x);
    out.write(reinterpret_cast<const char*>(&d), sizeof(d));
  }
  const bool ok = err / scale <= tol && std::isfinite(err);
  if (!ok) std::fprintf(stderr, "cblas_program: %s: relative error %.3g > %.3g\n", label, err / scale, tol);
  return ok;
}

bool run(const Case& cs, uint64_t seed, std::ofstream& out, const char* label) {
  return cs.fp64 ? run_case<double>(cs, seed, out, label) : run_case<float>(cs, seed, out, label);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: interpose_cblas_program OUT\n");
    return 2;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  if (!out) {
    std::fprintf(stderr, "cblas_program: cannot write %s\n", argv[1]);
    return 2;
  }
  // The servable problems: each distinct, so the results file gets one line for each.
  const Case servable[] = {
      {false, kCol, kN, kN, 33, 17, 29, 0, 1.0, 0.0},       // cblas_sgemm column-major
      {false, kRow, kN, kT, 8, 40, 64, 0, 1.0, 0.0},        // y = x W^T (nn.Linear)
      {false, kRow, kT, kN, 19, 11, 23, 3, 0.5, 0.5},       // row-major, ld > cols, beta
      {true, kCol, kT, kT, 21, 13, 9, 2, -1.0, -1.0},       // cblas_dgemm
      {false, kCol, kN, kT, 16, 9, 31, 1, 1.0, 0.0, true},  // sgemm_
      {true, kCol, kT, kN, 7, 7, 7, 0, 2.0, 1.0, true},     // dgemm_
  };
  bool ok = true;
  int label = 0;
  char name[32];
  for (const Case& cs : servable) {
    std::snprintf(name, sizeof(name), "case %d", label++);
    ok &= run(cs, 100 + label, out, name);
  }
  ok &= run(servable[0], 7, out, "repeat of case 0");  // same problem: no new results line
  // Pass through: BLAS's own business (C = beta C without reading A, B).
  ok &= run(Case{false, kCol, kN, kN, 5, 6, 7, 0, 0.0, 2.0}, 8, out, "alpha = 0");
  ok &= run(Case{true, kRow, kN, kN, 5, 6, 0, 0, 1.0, 0.5}, 9, out, "k = 0");

  // Threads: one problem from several threads at once.
  std::vector<std::thread> threads;
  std::vector<int> thread_ok(4, 1);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &thread_ok, &servable] {
      std::ofstream sink("/dev/null", std::ios::binary);
      for (int i = 0; i < 5; ++i) thread_ok[size_t(t)] &= run(servable[1], uint64_t(1000 + 10 * t + i), sink, "thread");
    });
  }
  for (auto& th : threads) th.join();
  for (int t : thread_ok) ok &= t != 0;

  // fork: the child computes with the same BLAS (the interposer passes its calls through).
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    std::ofstream sink("/dev/null", std::ios::binary);
    _exit(run(servable[2], 77, sink, "forked child") ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "cblas_program: the forked child failed\n");
    ok = false;
  }

  // A program that loads its BLAS itself and calls it through its own handle.
  if (void* h = dlopen("libblas.so.3", RTLD_NOW | RTLD_LOCAL)) {
    using Fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
    if (auto fn = reinterpret_cast<Fn>(dlsym(h, "cblas_sgemm"))) {
      std::vector<float> a(12, 1.f), b(12, 2.f), c(9, 0.f);
      fn(kCol, kN, kN, 3, 3, 4, 1.f, a.data(), 3, b.data(), 4, 0.f, c.data(), 3);
      for (float x : c) ok &= x == 8.f;
    }
  }
  std::printf("servable_problems=%zu engine_loaded=%d\n", sizeof(servable) / sizeof(servable[0]),
              int(interpose_test::engine_loaded()));
  std::printf("expect pass: m, n, k or alpha is 0: 2\n");
  std::printf("%s\n", ok ? "all results correct" : "WRONG RESULTS");
  return ok ? 0 : 1;
}
