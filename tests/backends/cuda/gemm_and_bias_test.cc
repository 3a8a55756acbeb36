// Every CUDA GemmAndBias candidate (Default, GemmAndBias_Split, the GemmAndBias_Lt_ family and
// names rebuilt from the family's) against the fp64 host reference, per activation and dtype:
// odd sizes, all transposes, ld > rows, NaN-poisoned C whose ld gaps must stay untouched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>

#include "backends/cuda/cuda_testing.h"
#include "backends/cuda/register.h"
#include "ops/gemm_and_bias/reference.h"
#include "tunableop/context.h"
#include "tunableop/gemm_and_bias.h"
#include "tunableop/registry.h"

namespace tunableop::testing {
namespace {

struct BiasCandidates {
  Registry r;
  std::vector<GemmAndBiasCandidate> all;  // static ones then the family's expansion
};

void collect(BiasCandidates& out, const GemmAndBiasParams& p) {
  out.all.clear();
  for (const auto& c : out.r.list<GemmAndBiasCandidate>())
    if (c.device == DeviceKind::kCuda) out.all.push_back(c);
  for (const auto& f : out.r.list<GemmAndBiasCandidateFamily>())
    if (f.device == DeviceKind::kCuda)
      for (auto& c : f.expand(p, 1)) out.all.push_back(std::move(c));
}

StatusOr<GemmAndBiasCandidate> resolve(Registry& r, const GemmAndBiasParams& p, const std::string& name) {
  for (const auto& f : r.list<GemmAndBiasCandidateFamily>())
    if (name.rfind(f.prefix, 0) == 0) return f.resolve(p, name);
  return Status::not_found(name);
}

class CudaGemmAndBias : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGemmAndBias, EveryCandidateMatchesFp64Reference) {
  TUNABLEOP_REQUIRE_GPU();
  const DType dt = GetParam();
  BiasCandidates cands;
  register_cuda(cands.r);
  std::map<std::string, int> ran;
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    std::vector<GemmParams> shapes = random_gemm_shapes(dt, 11 + uint64_t(act), 8, false, 97);
    GemmParams big;  // a shape where cuBLASLt has real choices
    big.dtype = dt;
    big.transa = 'T';
    big.m = 256;
    big.n = 192;
    big.k = 320;
    shapes.push_back(big.with_defaults());
    for (GemmParams g : shapes) {
      g.beta = 0.0;
      GemmAndBiasParams p{g.with_defaults(), act};
      HostGemmProblem prob = HostGemmProblem::random(p.gemm, uint64_t(g.m * 7 + g.k));  // C NaN, gaps sentinel
      std::vector<uint8_t> bias(size_t(g.m) * dtype_size(dt));
      std::mt19937_64 rng(uint64_t(g.n));
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      for (int64_t i = 0; i < g.m; ++i) store_from_double(dt, bias.data(), i, dist(rng));
      std::vector<double> ref = gemm_and_bias_reference_f64(p, prob.a.data(), prob.b.data(), bias.data(), nullptr);
      DeviceGemm dev(prob);
      DeviceBuffer dbias(bias.size());
      ASSERT_EQ(cudaMemcpy(dbias.data(), bias.data(), bias.size(), cudaMemcpyHostToDevice), cudaSuccess);

      collect(cands, p);
      ASSERT_FALSE(cands.all.empty());
      ASSERT_EQ(cands.all.front().name, "Default");
      std::vector<GemmAndBiasCandidate> to_run = cands.all;
      for (const auto& c : cands.all) {  // names the family wrote must rebuild
        if (c.name.rfind("GemmAndBias_Lt_", 0) != 0) continue;
        auto again = resolve(cands.r, p, c.name);
        ASSERT_TRUE(again.is_ok()) << c.name << ": " << again.status().to_string();
        EXPECT_EQ(again->name, c.name);
        to_run.push_back(*again);
      }
      for (const auto& c : to_run) {
        SCOPED_TRACE(c.name + " " + activation_name(act) + " " + describe(p.gemm));
        if (!c.supports(p).is_ok()) continue;
        dev.reset_c(prob);
        GemmOperands go = dev.operands();
        GemmAndBiasOperands o{go.a, go.b, dbias.data(), go.c};
        DeviceBuffer ws;
        if (c.workspace_bytes && c.workspace_bytes(p) > 0) {
          ws = DeviceBuffer(c.workspace_bytes(p));
          o.workspace = ws.data();
          o.workspace_bytes = ws.size();
        }
        Status st = c.run(p, o);
        cudaError_t e = cudaDeviceSynchronize();
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
        std::vector<uint8_t> out = dev.read_c();
        double err = relative_error(p.gemm, out.data(), ref), tol = gemm_and_bias_tolerance(p);
        EXPECT_LE(err, tol);
        const size_t es = dtype_size(dt);
        for (int64_t idx = 0; idx < g.c_span(); ++idx) {
          if (idx % p.gemm.ldc < p.gemm.m) continue;
          ASSERT_EQ(std::memcmp(out.data() + size_t(idx) * es, prob.c_initial.data() + size_t(idx) * es, es), 0)
              << "gap element " << idx << " written";
        }
        ++ran[c.name.substr(0, c.name.rfind("_Lt_") != std::string::npos ? c.name.find("_Lt_") + 3 : c.name.size())];
      }
    }
  }
  EXPECT_GT(ran["Default"], 0);
  EXPECT_GT(ran["GemmAndBias_Split"], 0);
  if (dt != DType::kF64) {
    EXPECT_GT(ran["GemmAndBias_Lt"], 0) << "cuBLASLt offered no epilogue algorithm";
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, CudaGemmAndBias,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16, DType::kF64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaGemmAndBiasDispatch, TunesOnceAndServes) {
  TUNABLEOP_REQUIRE_GPU();
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename,
                      ::testing::TempDir() + "tunableop_cuda_bias_" + std::to_string(::getpid()) + "_%d.csv")
                  .is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5.0).is_ok());
  Context ctx(Device::cuda(0), std::move(cfg));
  GemmAndBiasParams p;
  p.gemm.dtype = DType::kBF16;
  p.gemm.transa = 'T';
  p.gemm.m = 512;
  p.gemm.n = 64;
  p.gemm.k = 256;
  p.act = Activation::kGelu;
  p = p.with_defaults();
  HostGemmProblem prob = HostGemmProblem::random(p.gemm, 3);
  std::vector<uint8_t> bias(size_t(p.gemm.m) * 2);
  for (int64_t i = 0; i < p.gemm.m; ++i) store_from_double(p.gemm.dtype, bias.data(), i, 0.01 * double(i % 13));
  std::vector<double> ref = gemm_and_bias_reference_f64(p, prob.a.data(), prob.b.data(), bias.data(), nullptr);
  DeviceGemm dev(prob);
  DeviceBuffer dbias(bias.size());
  ASSERT_EQ(cudaMemcpy(dbias.data(), bias.data(), bias.size(), cudaMemcpyHostToDevice), cudaSuccess);
  for (int call = 0; call < 2; ++call) {
    dev.reset_c(prob);
    GemmOperands go = dev.operands();
    Status st = gemm_and_bias(ctx, p, GemmAndBiasOperands{go.a, go.b, dbias.data(), go.c});
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> out = dev.read_c();
    EXPECT_LE(relative_error(p.gemm, out.data(), ref), gemm_and_bias_tolerance(p)) << "call " << call;
  }
  EXPECT_EQ(ctx.results().size(), 1u);
}

}  // namespace
}  // namespace tunableop::testing
