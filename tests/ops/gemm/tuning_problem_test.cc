// GemmTuningProblem: rotating input copies, the caller's buffers left alone, C restored or
// poisoned before every numerics check, workspace handed to candidates.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu_runtime.h"
#include "ops/gemm/reference.h"
#include "ops/gemm/tuning_problem.h"
#include "support/gemm_testing.h"

namespace tunableop {
namespace {

using testing::HostGemmProblem;

// C = alpha op(A) op(B) + beta C through the fp64 reference; only the m x n matrices are written.
Status reference_run(const GemmParams& p, const GemmOperands& o) {
  auto ref = gemm_reference_f64(p, o.a, o.b, p.beta != 0.0 ? o.c : nullptr);
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        int64_t idx = bt * p.stride_c + i + j * p.ldc;
        store_from_double(p.dtype, o.c, idx, ref[size_t(idx)]);
      }
  return Status::ok();
}

GemmCandidate candidate(std::string name, std::function<Status(const GemmParams&, const GemmOperands&)> run) {
  GemmCandidate c;
  c.name = std::move(name);
  c.supports = [](const GemmParams&) { return Status::ok(); };
  c.run = std::move(run);
  return c;
}

GemmParams make(int64_t m, int64_t n, int64_t k, double beta = 0.0) {
  GemmParams p;
  p.transa = 'N';
  p.transb = 'T';
  p.m = m;
  p.n = n;
  p.k = k;
  p.beta = beta;
  p.ldc = m + 3;
  return p.with_defaults();
}

class GemmTuningProblemTest : public ::testing::Test {
 protected:
  GemmTuningProblemTest() { register_cpu_runtime(reg_); }
  const DeviceRuntime& rt() { return *reg_.runtime(DeviceKind::kCpu); }
  StatusOr<std::unique_ptr<GemmTuningProblem>> create(HostGemmProblem& prob, std::vector<GemmCandidate> cands,
                                                      int64_t rotating_mib = 0, bool numerics = true) {
    TuningPolicy pol;
    pol.rotating_buffer_mib = rotating_mib;
    pol.numerical_check = numerics;
    return GemmTuningProblem::create(prob.p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()},
                                     std::move(cands), rt(), pol, log_);
  }
  Registry reg_;
  Logger log_;
};

TEST_F(GemmTuningProblemTest, CandidatesMustStartWithDefault) {
  HostGemmProblem prob = HostGemmProblem::random(make(4, 4, 4), 1);
  auto pr = create(prob, {candidate("Gemm_A", reference_run)});
  ASSERT_FALSE(pr.is_ok());
  EXPECT_EQ(pr.status().code(), StatusCode::kInternal);
  EXPECT_FALSE(create(prob, {}).is_ok());
}

TEST_F(GemmTuningProblemTest, DescribesItsProblem) {
  HostGemmProblem prob = HostGemmProblem::random(make(5, 6, 7), 1);
  auto pr = create(prob, {candidate("Default", reference_run), candidate("Gemm_A", reference_run)});
  ASSERT_TRUE(pr.is_ok()) << pr.status().to_string();
  EXPECT_EQ((*pr)->op_signature(), gemm_op_signature(prob.p));
  EXPECT_EQ((*pr)->params_signature(), gemm_params_signature(prob.p));
  EXPECT_EQ((*pr)->candidate_count(), 2u);
  EXPECT_EQ((*pr)->candidate_name(1), "Gemm_A");
  EXPECT_TRUE((*pr)->supports(1).is_ok());
}

TEST_F(GemmTuningProblemTest, RotatingCopiesFillTheRequestedSize) {
  // 128 x 128 x 128 fp32 with ldc 131: A 64 KiB, B 64 KiB, C 65.5 KiB per set.
  HostGemmProblem prob = HostGemmProblem::random(make(128, 128, 128), 1);
  const size_t set_bytes = size_t(prob.p.a_span() + prob.p.b_span() + prob.p.c_span()) * 4;
  auto off = create(prob, {candidate("Default", reference_run)}, 0);
  ASSERT_TRUE(off.is_ok());
  EXPECT_EQ((*off)->rotation_count(), 1u);
  auto one_mib = create(prob, {candidate("Default", reference_run)}, 1);
  ASSERT_TRUE(one_mib.is_ok());
  EXPECT_EQ((*one_mib)->rotation_count(), ((size_t(1) << 20) + set_bytes - 1) / set_bytes);
  EXPECT_GE((*one_mib)->bytes_allocated(), size_t(1) << 20);
  auto automatic = create(prob, {candidate("Default", reference_run)}, -1);
  ASSERT_TRUE(automatic.is_ok());
  EXPECT_GE((*automatic)->rotation_count(), 1u);
  EXPECT_LE((*automatic)->rotation_count(), 64u);
  // A tiny problem never gets more than 64 copies.
  HostGemmProblem tiny = HostGemmProblem::random(make(2, 2, 2), 1);
  auto capped = create(tiny, {candidate("Default", reference_run)}, 64);
  ASSERT_TRUE(capped.is_ok());
  EXPECT_EQ((*capped)->rotation_count(), 64u);
}

TEST_F(GemmTuningProblemTest, EveryCopyHoldsTheCallersInputsAndTheCallersBuffersStayPut) {
  HostGemmProblem prob = HostGemmProblem::random(make(16, 8, 12, /*beta=*/1.0), 1);
  const auto a0 = prob.a, b0 = prob.b, c0 = prob.c;
  std::set<const void*> seen_a, seen_c;
  std::vector<bool> inputs_match;
  auto recorder = [&](const GemmParams& p, const GemmOperands& o) {
    seen_a.insert(o.a);
    seen_c.insert(o.c);
    inputs_match.push_back(std::memcmp(o.a, a0.data(), a0.size()) == 0 && std::memcmp(o.b, b0.data(), b0.size()) == 0);
    EXPECT_NE(o.a, static_cast<const void*>(prob.a.data()));
    EXPECT_NE(o.c, static_cast<void*>(prob.c.data()));
    return reference_run(p, o);
  };
  auto pr = create(prob, {candidate("Default", recorder)}, 1);
  ASSERT_TRUE(pr.is_ok());
  const size_t n = (*pr)->rotation_count();
  ASSERT_GT(n, 1u);
  for (size_t r = 0; r < 2 * n; ++r) ASSERT_TRUE((*pr)->run(0, r).is_ok());
  ASSERT_TRUE((*pr)->check_numerics(0).is_ok());
  EXPECT_EQ(seen_a.size(), n);
  EXPECT_EQ(seen_c.size(), n);
  for (bool ok : inputs_match) EXPECT_TRUE(ok);
  EXPECT_EQ(prob.a, a0);
  EXPECT_EQ(prob.b, b0);
  EXPECT_EQ(prob.c, c0) << "tuning must not write the caller's C";
}

TEST_F(GemmTuningProblemTest, NumericsCheckStartsFromPristineC) {
  // beta != 0: a correct candidate passes every time, because C is restored before each check.
  HostGemmProblem prob = HostGemmProblem::random(make(9, 7, 5, /*beta=*/-1.5), 1);
  auto pr = create(prob, {candidate("Default", reference_run), candidate("Gemm_A", reference_run)});
  ASSERT_TRUE(pr.is_ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE((*pr)->check_numerics(0).is_ok()) << i;
    EXPECT_TRUE((*pr)->check_numerics(1).is_ok()) << i;
    ASSERT_TRUE((*pr)->run(1, 0).is_ok());  // timing runs in between leave C dirty
  }
}

TEST_F(GemmTuningProblemTest, NumericsCheckCatchesWrongCandidates) {
  auto skips_last_column = [](const GemmParams& p, const GemmOperands& o) {
    GemmParams q = p;
    q.n = p.n - 1;
    return reference_run(q, o);
  };
  auto reads_c_when_beta_is_zero = [](const GemmParams& p, const GemmOperands& o) {
    GemmParams q = p;
    q.beta = 1.0;
    return reference_run(q, o);
  };
  auto slightly_off = [](const GemmParams& p, const GemmOperands& o) {
    GemmParams q = p;
    q.alpha = p.alpha * (1 + 1e-4);
    return reference_run(q, o);
  };
  auto fails = [](const GemmParams&, const GemmOperands&) { return Status::internal("launch failed"); };
  HostGemmProblem prob = HostGemmProblem::random(make(12, 10, 16), 1);
  auto pr = create(prob, {candidate("Default", reference_run), candidate("SkipsLastColumn", skips_last_column),
                          candidate("ReadsC", reads_c_when_beta_is_zero), candidate("SlightlyOff", slightly_off),
                          candidate("Fails", fails)});
  ASSERT_TRUE(pr.is_ok());
  EXPECT_TRUE((*pr)->check_numerics(0).is_ok());
  for (size_t i : {1, 2, 3}) {
    Status st = (*pr)->check_numerics(i);
    EXPECT_EQ(st.code(), StatusCode::kNumericsMismatch) << (*pr)->candidate_name(i) << ": " << st.to_string();
  }
  EXPECT_EQ((*pr)->check_numerics(4).code(), StatusCode::kInternal);
  EXPECT_TRUE((*pr)->check_numerics(0).is_ok()) << "a failed check leaves nothing behind";
}

TEST_F(GemmTuningProblemTest, Fp32RoundingIsWithinTolerance) {
  // The same product accumulated in fp32 instead of fp64 must pass.
  auto fp32_accumulate = [](const GemmParams& p, const GemmOperands& o) {
    const float* a = static_cast<const float*>(o.a);
    const float* b = static_cast<const float*>(o.b);
    float* c = static_cast<float*>(o.c);
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        float acc = 0;
        for (int64_t l = 0; l < p.k; ++l) acc += a[i + l * p.lda] * b[j + l * p.ldb];  // N, T
        c[i + j * p.ldc] = float(p.alpha) * acc;
      }
    return Status::ok();
  };
  HostGemmProblem prob = HostGemmProblem::random(make(33, 17, 257), 1);
  auto pr = create(prob, {candidate("Default", reference_run), candidate("Fp32", fp32_accumulate)});
  ASSERT_TRUE(pr.is_ok());
  EXPECT_TRUE((*pr)->check_numerics(1).is_ok()) << (*pr)->check_numerics(1).to_string();
}

TEST_F(GemmTuningProblemTest, WorkspaceIsHandedToCandidates) {
  size_t got_bytes = 0;
  void* got = nullptr;
  GemmCandidate needs = candidate("Gemm_Ws", [&](const GemmParams& p, const GemmOperands& o) {
    got = o.workspace;
    got_bytes = o.workspace_bytes;
    if (o.workspace) std::memset(o.workspace, 0xab, 4096);  // it must really be that large
    return reference_run(p, o);
  });
  needs.workspace_bytes = [](const GemmParams&) { return size_t(4096); };
  HostGemmProblem prob = HostGemmProblem::random(make(4, 4, 4), 1);
  auto pr = create(prob, {candidate("Default", reference_run), needs});
  ASSERT_TRUE(pr.is_ok());
  ASSERT_TRUE((*pr)->run(1, 0).is_ok());
  EXPECT_NE(got, nullptr);
  EXPECT_GE(got_bytes, 4096u);
}

}  // namespace
}  // namespace tunableop
