// Host time per cblas_sgemm call of a tiny GEMM, as a program linked to libblas.so.3 sees it.
// Run it plain and under `tunableop run`: the difference is what the interposer adds per call
// (hook, mapping, decision; plus any difference between the kernels when a tuned candidate
// runs instead of the library, which TUNABLEOP_VERBOSE=1's summary reports).
//   interpose_hook_bench [m n k [calls]]      prints: median_ns_per_call=<x> (of 31 batches)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc);

int main(int argc, char** argv) {
  const int m = argc > 3 ? std::atoi(argv[1]) : 4, n = argc > 3 ? std::atoi(argv[2]) : 4,
            k = argc > 3 ? std::atoi(argv[3]) : 4;
  const int calls = argc > 4 ? std::atoi(argv[4]) : 20000;
  if (m < 1 || n < 1 || k < 1 || calls < 1) {
    std::fprintf(stderr, "usage: interpose_hook_bench [m n k [calls]] (all >= 1)\n");
    return 2;
  }
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c(size_t(m) * n, 0.f);
  for (int i = 0; i < 100; ++i)  // warm-up (tuning happens here under `tunableop run --tune`)
    cblas_sgemm(102, 111, 111, m, n, k, 1.f, a.data(), m, b.data(), k, 0.f, c.data(), m);
  std::vector<double> per_call;
  const int batch = std::max(1, calls / 31);
  for (int r = 0; r < 31; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(102, 111, 111, m, n, k, 1.f, a.data(), m, b.data(), k, 0.f, c.data(), m);
    auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / batch);
  }
  std::sort(per_call.begin(), per_call.end());
  std::printf("median_ns_per_call=%.1f m=%d n=%d k=%d c00=%g\n", per_call[per_call.size() / 2], m, n, k, double(c[0]));
  return 0;
}
