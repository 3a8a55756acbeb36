// The CPU BLAS providers side by side: OpenBLAS and BLIS export the same symbols (cblas_sgemm,
// sgemm_), so this proves that each provider's calls land in its own library, that the same
// problem gives the same answer through each, and that no provider's thread setting leaks
// into another provider or into the caller's OpenMP setting.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "backends/cpu/providers_test_support.h"
#include "ops/gemm/reference.h"
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

// Every provider built into this binary, loaded from its default paths.
void register_all_providers(Registry& r) {
#ifdef TUNABLEOP_HAVE_OPENBLAS
  register_openblas(r);
#endif
#ifdef TUNABLEOP_HAVE_BLIS
  register_blis(r);
#endif
#ifdef TUNABLEOP_HAVE_ONEDNN
  register_onednn(r);
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
      if (ob.is_ok()) EXPECT_EQ((*ob)->num_threads(), openblas_before) << "OpenBLAS setting after " << c.name;
#endif
#ifdef TUNABLEOP_HAVE_BLIS
      if (bl.is_ok()) EXPECT_EQ((*bl)->num_threads(), odd_setting) << "BLIS setting after " << c.name;
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

}  // namespace
}  // namespace tunableop
