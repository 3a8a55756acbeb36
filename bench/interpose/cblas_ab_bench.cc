// In-process A/B of the interposer's host cost on the CPU path (ab_bench.h): cblas_sgemm of a
// small GEMM, the real one against the hooked one, in one process. Run it under the preload
// library (`tunableop run --tune`, `--no-tune`, or disabled); without it both arms are the same
// function and the row shows the method's noise. The BLAS is loaded at run time (libblas.so.3,
// else OpenBLAS), so the program runs on machines without Debian's libblas.
//   interpose_cblas_ab_bench [--mode LABEL] [--rounds R] [--block B] [--size M N K] [--expect on|off]
// Prints the table row (ab_bench.h). Exit 0; 1 when the arms' results are wrong, or (--expect)
// when the hooks did not count exactly the hooked arm's calls (on) or counted any (off: the
// interposer is disabled); 77 when no BLAS with cblas_sgemm is found.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ab_bench.h"

namespace ab = tunableop::interpose::ab;
using tunableop::interpose::Api;
using tunableop::interpose::Library;

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);

int main(int argc, char** argv) {
  const char* mode = "no preload";
  const char* expect = "";
  int rounds = 2000, block = 16, m = 8, n = 8, k = 8;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) {
      mode = argv[++i];
    } else if (!std::strcmp(argv[i], "--expect") && i + 1 < argc) {
      expect = argv[++i];
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--block") && i + 1 < argc) {
      block = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--size") && i + 3 < argc) {
      m = std::atoi(argv[++i]);
      n = std::atoi(argv[++i]);
      k = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mode LABEL] [--rounds R] [--block B] [--size M N K] [--expect on|off]\n",
                   argv[0]);
      return 2;
    }
  }
  if (rounds < 2 || block < 1 || m < 1 || n < 1 || k < 1) {
    std::fprintf(stderr, "rounds must be >= 2, block and sizes >= 1\n");
    return 2;
  }
  // RTLD_GLOBAL: the BLAS joins the global scope after the preload library, so the ordinary
  // lookup below finds the hook, as a program linked to libblas.so.3 would.
  void* lib = nullptr;
  for (const char* name : {"libblas.so.3", "libopenblas.so.0", "libcblas.so.3"})
    if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) != nullptr) break;
  auto hooked = lib ? reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sgemm")) : nullptr;
  if (hooked == nullptr) {
    std::printf("no BLAS with cblas_sgemm found: skipped\n");
    return 77;
  }
  const ab::Preload pre = ab::Preload::find();
  SgemmFn real = pre.real(Library::kBlas, "cblas_sgemm", hooked);
  if (real == nullptr) {
    std::printf("the preload library finds no real cblas_sgemm: skipped\n");
    return 77;
  }
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f), c1(size_t(m) * n), c2(size_t(m) * n);
  auto call_real = [&] { real(102, 111, 111, m, n, k, 1.f, a.data(), m, b.data(), k, 0.f, c1.data(), m); };
  auto call_hooked = [&] { hooked(102, 111, 111, m, n, k, 1.f, a.data(), m, b.data(), k, 0.f, c2.data(), m); };
  for (int i = 0; i < 200; ++i) {  // warm-up; under `tunableop run --tune` the problem is tuned here
    call_real();
    call_hooked();
  }
  const auto before = pre.counts(Api::kCblasSgemm);
  ab::Result r = ab::interleave(
      rounds, block, call_real, call_hooked, [] {}, [] {});
  const auto counts = ab::minus(pre.counts(Api::kCblasSgemm), before);
  ab::print_header(pre.present() ? "under the preload library" : "no preload library");
  char entry[64];
  std::snprintf(entry, sizeof(entry), "cblas_sgemm %dx%dx%d", m, n, k);
  ab::print_row(entry, mode, r, counts);
  // Both arms computed the same product (k * 0.5 * 0.25 in every element).
  const float want = float(k) * 0.125f;
  for (size_t i = 0; i < c1.size(); ++i) {
    if (c1[i] != want || c2[i] != want) {
      std::printf("wrong result at %zu: real %g, hooked %g, want %g\n", i, double(c1[i]), double(c2[i]), double(want));
      return 1;
    }
  }
  // The real arm must never reach the hooks: on, exactly the hooked arm's calls were counted;
  // off (disabled), none.
  if (!*expect) return 0;
  if (!pre.present()) {
    std::printf("--expect needs the preload library (run under tunableop run or LD_PRELOAD)\n");
    return 1;
  }
  const unsigned long long expected = !std::strcmp(expect, "on") ? (unsigned long long)rounds * block : 0;
  if (counts.total() != expected) {
    std::printf("hook counted %llu calls during the timing, expected %llu\n", counts.total(), expected);
    return 1;
  }
  if (expected == 0) return 0;
  // The process-wide switch (linear_suite.py --ab uses it): off, the hooks forward uncounted.
  if (pre.set_enabled == nullptr) {
    std::printf("the preload library exports no %s\n", tunableop::interpose::kSetEnabledSwitchName);
    return 1;
  }
  const auto t0 = pre.counts(Api::kCblasSgemm);
  pre.set_enabled(0);
  for (int i = 0; i < 10; ++i) call_hooked();
  const auto t1 = pre.counts(Api::kCblasSgemm);
  pre.set_enabled(1);
  for (int i = 0; i < 10; ++i) call_hooked();
  const auto t2 = pre.counts(Api::kCblasSgemm);
  if (t1.total() != t0.total() || t2.total() != t1.total() + 10) {
    std::printf("switched off the hooks counted %llu calls (expected 0), switched on again %llu (expected 10)\n",
                t1.total() - t0.total(), t2.total() - t1.total());
    return 1;
  }
  return 0;
}
