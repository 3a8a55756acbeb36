// Kernel lab: times our CPU kernel candidates against OpenBLAS's cblas_?gemm on one problem.
// Not a test (timings need a quiet machine); built on request: `cmake --build B --target
// bench_cpu_kernels`, then `bench_cpu_kernels M N K TRANSA TRANSB fp32|fp64 [reps] [effort]`.
//
// Each candidate is timed in two blocks of `reps` calls, alternating with OpenBLAS (ABAB), with a
// pause between blocks so that the spinning worker threads of the previous library (OpenMP's or
// OpenBLAS's) are asleep again; the figure is the median over both blocks.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/kernels/register.h"
#include "tunableop/gemm.h"
#include "tunableop/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<double> time_calls(const std::function<void()>& f, int reps) {
  std::vector<double> ts;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    ts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return ts;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class T>
int run(tunableop::GemmParams p, int reps, int effort) {
  using namespace tunableop;
  p = p.with_defaults();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<T> a(size_t(p.a_span())), b(size_t(p.b_span())), c(size_t(p.c_span()));
  for (auto& x : a) x = T(dist(rng));
  for (auto& x : b) x = T(dist(rng));
  GemmOperands ops;
  ops.a = a.data();
  ops.b = b.data();
  ops.c = c.data();

  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  auto openblas = [&](int threads) {
    return [&, threads] {
      openblas_set_num_threads(threads);
      auto ta = p.transa == 'N' ? CblasNoTrans : CblasTrans, tb = p.transb == 'N' ? CblasNoTrans : CblasTrans;
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasColMajor, ta, tb, int(p.m), int(p.n), int(p.k), float(p.alpha), a.data(), int(p.lda), b.data(),
                    int(p.ldb), float(p.beta), c.data(), int(p.ldc));
      } else {
        cblas_dgemm(CblasColMajor, ta, tb, int(p.m), int(p.n), int(p.k), p.alpha, a.data(), int(p.lda), b.data(),
                    int(p.ldb), p.beta, c.data(), int(p.ldc));
      }
    };
  };
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); };

  Registry r;
  register_cpu_kernels(r);
  std::printf("%s %c%c m=%ld n=%ld k=%ld, %d cores, %d reps x 2 blocks, wall-clock medians\n", dtype_name(p.dtype),
              p.transa, p.transb, long(p.m), long(p.n), long(p.k), cores, reps);
  std::printf("%-45s %10s %12s %10s\n", "candidate", "GFLOP/s", "OpenBLAS", "ratio");
  for (const GemmCandidate& cand : r.list<GemmCandidate>()) {
    if (cand.min_effort > effort || !cand.supports(p).is_ok()) continue;
    // Compare with OpenBLAS on as many threads as the candidate uses ("Default": all cores).
    const size_t tpos = cand.name.rfind("_t");
    const int threads = cand.name == "Default" ? cores : std::atoi(cand.name.c_str() + tpos + 2);
    auto ours = [&] {
      Status s = cand.run(p, ops);
      if (!s.is_ok()) std::fprintf(stderr, "%s: %s\n", cand.name.c_str(), s.to_string().c_str());
    };
    auto theirs = openblas(threads);
    ours();  // warm-up: scratch buffers, pages of C, thread pools
    theirs();
    std::vector<double> to, tb;
    for (int block = 0; block < 2; ++block) {
      pause();
      auto x = time_calls(theirs, reps);
      tb.insert(tb.end(), x.begin(), x.end());
      pause();
      auto y = time_calls(ours, reps);
      to.insert(to.end(), y.begin(), y.end());
    }
    const double go = p.flops() / median(to) / 1e9, gb = p.flops() / median(tb) / 1e9;
    std::printf("%-45s %10.1f %9.1f_t%d %10.2f\n", cand.name.c_str(), go, gb, threads, go / gb);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s M N K TRANSA TRANSB fp32|fp64 [reps=15] [effort=1]\n", argv[0]);
    return 2;
  }
  tunableop::GemmParams p;
  p.m = std::atol(argv[1]);
  p.n = std::atol(argv[2]);
  p.k = std::atol(argv[3]);
  p.transa = argv[4][0];
  p.transb = argv[5][0];
  const std::string dt = argv[6];
  const int reps = argc > 7 ? std::atoi(argv[7]) : 15;
  const int effort = argc > 8 ? std::atoi(argv[8]) : 1;
  if (dt == "fp32") {
    p.dtype = tunableop::DType::kF32;
    return run<float>(p, reps, effort);
  }
  if (dt == "fp64") {
    p.dtype = tunableop::DType::kF64;
    return run<double>(p, reps, effort);
  }
  std::fprintf(stderr, "dtype must be fp32 or fp64\n");
  return 2;
}
