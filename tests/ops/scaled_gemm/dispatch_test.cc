// scaled_gemm() end to end through a Context: the real CPU backend (its Default against the fp64
// reference on odd sizes, every mode, ld gaps untouched; PyTorch's lines in the results file),
// and candidates on a virtual clock (a correct Default, a faster correct candidate, a fastest
// wrong one that must be rejected).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "support/scaled_gemm_testing.h"
#include "support/scratch_dir.h"
#include "support/virtual_clock.h"
#include "tunableop/context.h"
#include "tunableop/op_tools.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {
namespace {

using testing::HostScaledGemmProblem;

using ScratchDir = testing::ScratchDir;

std::vector<std::string> entries(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.rfind("Validator,", 0) != 0) out.push_back(line);
  return out;
}

Config config(const ScratchDir& dir, bool tuning) {
  Config c = Config::defaults_only();
  EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
  EXPECT_TRUE(c.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxTuningDurationMs, 2.0).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxWarmupDurationMs, 1.0).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
  EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
  return c;
}

// Host operands of the problem (the CPU's device memory is host memory).
TEST(ScaledGemmDispatch, CpuDefaultMatchesTheReferenceOnOddShapes) {
  ScratchDir dir;
  Context ctx(Device::cpu(), config(dir, true));
  int n = 0;
  for (const ScaledGemmParams& shape : testing::random_scaled_gemm_shapes(17, 24)) {
    HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, uint64_t(++n));
    Status st = scaled_gemm(ctx, h.p, h.operands());
    ASSERT_TRUE(st.is_ok()) << st.to_string() << " " << testing::describe(h.p);
    EXPECT_TRUE(testing::matches_reference(h, h.c));
  }
  // Every problem tuned once, in PyTorch's layout.
  const auto lines = entries(dir.file("results0.csv"));
  ASSERT_EQ(lines.size(), 24u);
  for (const std::string& l : lines) EXPECT_EQ(l.rfind("ScaledGemmTunableOp_Float8_e", 0), 0u) << l;
}

TEST(ScaledGemmDispatch, WritesAndServesPyTorchsLine) {
  ScratchDir dir;
  const ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, 12, 40, 24);
  {
    Context ctx(Device::cpu(), config(dir, true));
    HostScaledGemmProblem h = HostScaledGemmProblem::random(p, 1);
    ASSERT_TRUE(scaled_gemm(ctx, h.p, h.operands()).is_ok());
    EXPECT_TRUE(testing::matches_reference(h, h.c));
  }
  const auto lines = entries(dir.file("results0.csv"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,"
                           "tn_24_12_40_ld_40_40_24_rw_1_bias_None,Default,",
                           0),
            0u)
      << lines[0];
  // Tuning off: the stored choice is served, nothing new is written.
  Context served(Device::cpu(), config(dir, false));
  auto plan = served.plan(p);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  HostScaledGemmProblem h = HostScaledGemmProblem::random(p, 2);
  ASSERT_TRUE(plan->run(h.operands()).is_ok());
  EXPECT_EQ(plan->solution(), "Default");
  EXPECT_TRUE(testing::matches_reference(h, h.c));
  EXPECT_EQ(entries(dir.file("results0.csv")).size(), 1u);
}

TEST(ScaledGemmDispatch, RefusesBadArgumentsAndSkipsEmptyProblems) {
  ScratchDir dir;
  Context ctx(Device::cpu(), config(dir, true));
  ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kTensorwise, 3, 16, 8);
  p.bias_dtype = DType::kBF16;
  HostScaledGemmProblem h = HostScaledGemmProblem::random(p, 3);
  ScaledGemmOperands o = h.operands();
  o.bias = nullptr;
  EXPECT_EQ(scaled_gemm(ctx, h.p, o).code(), StatusCode::kInvalidArgument);
  o = h.operands();
  o.scale_b = nullptr;
  EXPECT_EQ(scaled_gemm(ctx, h.p, o).code(), StatusCode::kInvalidArgument);
  ScaledGemmParams bad = h.p;
  bad.a_dtype = DType::kF16;
  EXPECT_EQ(scaled_gemm(ctx, bad, h.operands()).code(), StatusCode::kInvalidArgument);
  ScaledGemmParams empty = h.p;
  empty.n = 0;
  EXPECT_TRUE(scaled_gemm(ctx, empty, ScaledGemmOperands{}).is_ok());
  EXPECT_TRUE(entries(dir.file("results0.csv")).empty());
}

TEST(ScaledGemmDispatch, OfflineTuningOnRandomOperands) {
  ScratchDir dir;
  Context ctx(Device::cpu(), config(dir, false));
  ScaledGemmParams p = scaled_linear_params(DType::kF8E5M2, DType::kF32, ScaleMode::kRowwise, 5, 33, 17);
  p.a_dtype = DType::kF8E4M3;
  p.bias_dtype = DType::kBF16;
  auto rep = OpTools<ScaledGemmOp>::tune(ctx, p);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_EQ(rep->winner.solution, "Default");
  const auto lines = entries(dir.file("results0.csv"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN,tn_17_5_33_ld_33_33_17_rw_1_bias_"
                           "BFloat16,Default,",
                           0),
            0u)
      << lines[0];
}

// Candidates on a virtual clock: Default (correct, 2 ms), ScaledGemm_Fast (correct, 0.3 ms),
// ScaledGemm_Wrong (0.01 ms: 6.25% too large, as a scale rounded to e4m3 would make it). The
// wrong one is screened as fastest, then fails the numerics check against the fp64 reference;
// the fast correct one wins.
class TestBackend {
 public:
  RegisterFn registrar() {
    return [this](Registry& r) {
      testing::register_host_on_virtual_clock(r, clock_);
      for (const char* n : {"Default", "ScaledGemm_Wrong", "ScaledGemm_Fast"})
        r.list<ScaledGemmCandidate>().push_back(candidate(n));
    };
  }
  int calls(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[name];
  }

 private:
  ScaledGemmCandidate candidate(const std::string& name) {
    ScaledGemmCandidate c;
    c.name = name;
    c.supports = [](const ScaledGemmParams&) { return Status::ok(); };
    const double cost = name == "Default" ? 2.0 : name == "ScaledGemm_Fast" ? 0.3 : 0.01;
    const bool wrong = name == "ScaledGemm_Wrong";
    c.run = [this, name, cost, wrong](const ScaledGemmParams& p, const ScaledGemmOperands& o) -> Status {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[name];
      }
      const std::vector<double> ref = scaled_gemm_reference_f64(p, o);
      const double factor = wrong ? 1.0625 : 1.0;
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t i = 0; i < p.m; ++i)
          store_from_double(p.out_dtype, o.c, i + j * p.ldc, factor * ref[size_t(i + j * p.ldc)]);
      clock_.fetch_add(cost);
      return Status::ok();
    };
    return c;
  }
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::atomic<double> clock_{0};
};

TEST(ScaledGemmDispatch, AWrongButFastCandidateIsRejected) {
  ScratchDir dir;
  TestBackend backend;
  Context ctx(Device::cpu(), config(dir, true), backend.registrar());
  for (ScaleMode mode : {ScaleMode::kTensorwise, ScaleMode::kRowwise}) {
    HostScaledGemmProblem h =
        HostScaledGemmProblem::random(scaled_linear_params(DType::kF8E4M3, DType::kBF16, mode, 7, 48, 20), 5);
    ASSERT_TRUE(scaled_gemm(ctx, h.p, h.operands()).is_ok());
    EXPECT_TRUE(testing::matches_reference(h, h.c));
  }
  const auto lines = entries(dir.file("results0.csv"));
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& l : lines) EXPECT_NE(l.find(",ScaledGemm_Fast,"), std::string::npos) << l;
  EXPECT_GE(backend.calls("ScaledGemm_Wrong"), 2) << "screened, then checked and rejected, once per problem";
}

}  // namespace
}  // namespace tunableop
