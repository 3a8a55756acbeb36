// The CPU BLAS providers side by side: OpenBLAS and BLIS export the same symbols (cblas_sgemm,
// sgemm_), so this proves that each provider's calls land in its own library, that the same
// problem gives the same answer through each, and that no provider's thread setting leaks
// into another provider or into the caller's OpenMP setting.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "backends/cpu/providers_test_support.h"
#include "ops/gemm/reference.h"
#include "tunableop/cpu_info.h"
#ifdef TUNABLEOP_HAVE_OPENBLAS
#include "backends/cpu/openblas/openblas_library.h"
#include "backends/cpu/openblas/register.h"
#endif
#ifdef TUNABLEOP_HAVE_BLIS
#include "backends/cpu/blis/blis_library.h"
#include "backends/cpu/blis/register.h"
#endif
#ifdef TUNABLEOP_HAVE_ONEDNN
#include "backends/cpu/onednn/onednn_library.h"
#include "backends/cpu/onednn/register.h"
#endif

namespace tunableop {
namespace {

// The default paths, then FILE in $TUNABLEOP_TEST_LIBRARY_DIR when set: lets the benchmark
// below run on a machine where a library is copied in rather than installed.
[[maybe_unused]] std::vector<std::string> with_test_dir(std::vector<std::string> paths, const char* file) {
  if (const char* dir = std::getenv("TUNABLEOP_TEST_LIBRARY_DIR")) paths.push_back(std::string(dir) + "/" + file);
  return paths;
}

// Every provider built into this binary.
void register_all_providers(Registry& r) {
#ifdef TUNABLEOP_HAVE_OPENBLAS
  register_openblas_from(r, with_test_dir(OpenblasLibrary::default_paths(), "libopenblas.so.0"));
#endif
#ifdef TUNABLEOP_HAVE_BLIS
  register_blis_from(r, with_test_dir(BlisLibrary::default_paths(), "libblis.so.4"));
#endif
#ifdef TUNABLEOP_HAVE_ONEDNN
  register_onednn_from(r, with_test_dir(OnednnLibrary::default_paths(), "libdnnl.so.2"));
#endif
}

TEST(CpuProvidersTest, OpenblasAndBlisEachAnswerFromTheirOwnLibrary) {
#if defined(TUNABLEOP_HAVE_OPENBLAS) && defined(TUNABLEOP_HAVE_BLIS)
  auto ob = OpenblasLibrary::open_first(OpenblasLibrary::default_paths());
  auto bl = BlisLibrary::open_first(BlisLibrary::default_paths());
  if (!ob.is_ok() || !bl.is_ok()) GTEST_SKIP() << "needs both OpenBLAS and BLIS at run time";
  // Both export cblas_sgemm and sgemm_; through each handle they are different functions in
  // different files.
  for (const char* shared : {"cblas_sgemm", "sgemm_"}) {
    const std::string in_openblas = (*ob)->symbol_file(shared), in_blis = (*bl)->symbol_file(shared);
    EXPECT_NE(in_openblas.find("openblas"), std::string::npos) << shared << " -> " << in_openblas;
    EXPECT_NE(in_blis.find("blis"), std::string::npos) << shared << " -> " << in_blis;
    EXPECT_NE(in_openblas, in_blis);
  }
  // Each handle sees only its own library's native API, and reports its own identity.
  EXPECT_EQ((*ob)->symbol_file("bli_info_get_version_str"), "");
  EXPECT_EQ((*bl)->symbol_file("openblas_get_config"), "");
  EXPECT_EQ((*ob)->config().rfind("OpenBLAS ", 0), 0u) << (*ob)->config();
  EXPECT_NE((*bl)->version(), "unknown");
  EXPECT_EQ((*bl)->symbol_file("bli_sgemm_ex"), (*bl)->symbol_file("bli_info_get_version_str"));
  EXPECT_EQ((*ob)->symbol_file("cblas_sgemm"), (*ob)->symbol_file("openblas_get_config"));
#else
  GTEST_SKIP() << "built without OpenBLAS or BLIS";
#endif
}

TEST(CpuProvidersTest, TheSameProblemAgreesThroughEveryProvider) {
  Registry r;
  register_all_providers(r);
  const auto& all = r.list<GemmCandidate>();
  if (all.empty()) GTEST_SKIP() << "no CPU BLAS provider loadable here";
  for (char ta : {'N', 'T'}) {
    GemmParams p;
    p.transa = ta, p.transb = 'N', p.m = 123, p.n = 77, p.k = 201, p.lda = (ta == 'N' ? 123 : 201) + 3, p.alpha = -0.75,
    p.beta = 0.5, p.batch = 2;
    auto prob = testing::HostGemmProblem::random(p, 42);
    auto ref = gemm_reference_f64(prob.p, prob.a.data(), prob.b.data(), prob.c_initial.data());
    std::vector<std::vector<uint8_t>> outputs;
    for (const auto& c : all) {
      Status st;
      auto out = testing::run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
      EXPECT_TRUE(testing::matches_reference(prob, out)) << c.name;
      outputs.push_back(std::move(out));
    }
    // Pairwise: every provider's answer is within the reference tolerance of every other's.
    for (size_t i = 1; i < outputs.size(); ++i) {
      std::vector<double> first(size_t(prob.p.c_span()));
      for (int64_t e = 0; e < prob.p.c_span(); ++e)
        first[size_t(e)] = load_as_double(DType::kF32, outputs[0].data(), e);
      EXPECT_LE(relative_error(prob.p, outputs[i].data(), first), 2 * gemm_tolerance(prob.p))
          << all[i].name << " vs " << all[0].name;
    }
  }
}

TEST(CpuProvidersTest, NoCandidateLeaksThreadSettingsIntoAnotherLibraryOrTheCaller) {
  Registry r;
  register_all_providers(r);
  const auto& all = r.list<GemmCandidate>();
  if (all.empty()) GTEST_SKIP() << "no CPU BLAS provider loadable here";
  GemmParams p;
  p.m = 256, p.n = 192, p.k = 160, p.beta = 1.0;
  auto prob = testing::HostGemmProblem::random(p, 9);
  // Settings chosen to differ from every candidate's thread count.
  const int odd_setting = 7;
#ifdef TUNABLEOP_HAVE_OPENBLAS
  auto ob = OpenblasLibrary::open_first(OpenblasLibrary::default_paths());
  const int openblas_original = ob.is_ok() ? (*ob)->num_threads() : 0;
  if (ob.is_ok()) (*ob)->set_num_threads(odd_setting);
  const int openblas_before = ob.is_ok() ? (*ob)->num_threads() : 0;
#endif
#ifdef TUNABLEOP_HAVE_BLIS
  auto bl = BlisLibrary::open_first(BlisLibrary::default_paths());
  const int blis_original = bl.is_ok() ? (*bl)->num_threads() : 0;
  if (bl.is_ok()) (*bl)->set_num_threads(odd_setting);
#endif
#ifdef _OPENMP
  const int omp_original = omp_get_max_threads();
  omp_set_num_threads(odd_setting);
#endif
  for (int round = 0; round < 2; ++round) {
    for (const auto& c : all) {
      Status st;
      auto out = testing::run_candidate(c, prob, &st);
      ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
      EXPECT_TRUE(testing::matches_reference(prob, out)) << c.name;
#ifdef TUNABLEOP_HAVE_OPENBLAS
      if (ob.is_ok()) {
        EXPECT_EQ((*ob)->num_threads(), openblas_before) << "OpenBLAS setting after " << c.name;
      }
#endif
#ifdef TUNABLEOP_HAVE_BLIS
      if (bl.is_ok()) {
        EXPECT_EQ((*bl)->num_threads(), odd_setting) << "BLIS setting after " << c.name;
      }
#endif
#ifdef _OPENMP
      EXPECT_EQ(omp_get_max_threads(), odd_setting) << "caller's OpenMP setting after " << c.name;
#endif
    }
  }
#ifdef TUNABLEOP_HAVE_OPENBLAS
  if (ob.is_ok()) (*ob)->set_num_threads(openblas_original);
#endif
#ifdef TUNABLEOP_HAVE_BLIS
  if (bl.is_ok()) (*bl)->set_num_threads(blis_original);
#endif
#ifdef _OPENMP
  omp_set_num_threads(omp_original);
#endif
}

TEST(CpuProvidersTest, ProvidersRegisterSideBySideWithDistinctNamesAndValidators) {
  Registry r;
  register_all_providers(r);
  std::set<std::string> names, keys;
  for (const auto& c : r.list<GemmCandidate>()) EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
  for (const auto& v : r.validators()) {
    EXPECT_TRUE(keys.insert(v.key).second) << "duplicate validator " << v.key;
    EXPECT_FALSE(v.value().empty()) << v.key;
  }
  for (const auto& note : r.notes()) std::cout << "note: " << note << "\n";
}

// Not a correctness test: GFLOP/s of every provider candidate on LLM-shaped fp32 problems, for
// docs/backends-cpu-libraries.md. Disabled by default; run it with
//   test_cpu_providers --gtest_also_run_disabled_tests --gtest_filter='*GflopsPerCandidate*'
// Inputs rotate through copies that together exceed the last-level cache (as in the tuner),
// so no figure measures a warm cache that a model's weights would not have.
TEST(CpuProvidersBench, DISABLED_GflopsPerCandidate) {
  Registry r;
  register_all_providers(r);
  for (const auto& note : r.notes()) std::printf("note: %s\n", note.c_str());
  for (const auto& v : r.validators()) std::printf("%s %s\n", v.key.c_str(), v.value().c_str());
  // TUNABLEOP_TEST_BENCH_ONLY=Gemm_Blis times only the candidates whose names contain it.
  std::vector<GemmCandidate> all;
  const char* only = std::getenv("TUNABLEOP_TEST_BENCH_ONLY");
  for (const auto& c : r.list<GemmCandidate>())
    if (only == nullptr || c.name.find(only) != std::string::npos) all.push_back(c);
  if (all.empty()) GTEST_SKIP() << "no CPU BLAS provider loadable here";
  struct Shape {
    const char* name;
    char ta;
    int64_t m, n, k;
  };
  // Seed example 1 and Llama-2-7B / Gemma-2B projections as column-major y = W x problems.
  const Shape shapes[] = {{"seed-example-1", 'N', 512, 1024, 2048},      {"llama7b-qkvo-1tok", 'T', 4096, 1, 4096},
                          {"llama7b-qkvo-8tok", 'T', 4096, 8, 4096},     {"llama7b-up-8tok", 'T', 11008, 8, 4096},
                          {"llama7b-qkvo-128tok", 'T', 4096, 128, 4096}, {"gemma2b-q-128tok", 'T', 2048, 128, 2048}};
  const size_t pool_floats = std::max<size_t>(cpu_last_level_cache_bytes() * 3 / 2, size_t(64) << 20) / 4;
  std::vector<float> pool(pool_floats);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : pool) x = dist(rng);
  std::printf("%-22s %-20s", "shape", "column-major");
  for (const auto& c : all) std::printf(" %16s", c.name.c_str());
  std::printf("   (GFLOP/s, median)\n");
  for (const Shape& s : shapes) {
    GemmParams p;
    p.transa = s.ta, p.m = s.m, p.n = s.n, p.k = s.k;
    p = p.with_defaults();
    const size_t per_copy = size_t(p.a_span() + p.b_span() + p.c_span());
    const size_t copies = std::max<size_t>(1, pool.size() / per_copy);
    char dims[64];
    std::snprintf(dims, sizeof dims, "%cN %ldx%ldx%ld", s.ta, long(s.m), long(s.n), long(s.k));
    std::printf("%-22s %-20s", s.name, dims);
    for (const auto& c : all) {
      size_t next = 0;
      auto run_once = [&] {
        float* base = pool.data() + (next++ % copies) * per_copy;
        GemmOperands ops;
        ops.a = base, ops.b = base + p.a_span(), ops.c = base + p.a_span() + p.b_span();
        return c.run(p, ops);
      };
      ASSERT_TRUE(run_once().is_ok());  // warm-up: thread start, JIT, packing buffers
      ASSERT_TRUE(run_once().is_ok());
      std::vector<double> ms;
      const auto start = std::chrono::steady_clock::now();
      while (ms.size() < 50) {
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_TRUE(run_once().is_ok());
        const auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (ms.size() >= 7 && std::chrono::duration<double>(t1 - start).count() > 1.0) break;
      }
      std::nth_element(ms.begin(), ms.begin() + long(ms.size() / 2), ms.end());
      std::printf(" %16.1f", p.flops() / ms[ms.size() / 2] / 1e6);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace tunableop
