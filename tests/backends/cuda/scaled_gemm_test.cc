// Every CUDA ScaledGemm candidate (Default, our FP8 kernels, the split variants, both cuBLASLt
// FP8 families and names rebuilt from them) against the fp64 reference on the dequantized
// values: odd sizes, both scale modes, bias and no bias, every output type, NaN-poisoned C whose
// ld gaps must stay untouched. Then a wrong-but-fast candidate beside the real ones is rejected
// by the tuner, and a problem tuned through a context is served.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "backends/cuda/cuda_testing.h"
#include "backends/cuda/register.h"
#include "backends/cuda/scaled_gemm/candidates.h"
#include "support/scaled_gemm_testing.h"
#include "tunableop/context.h"
#include "tunableop/registry.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::testing {
namespace {

// A problem's operands on the device; C starts as the host problem's (NaN, gap sentinels).
struct DeviceScaledGemm {
  explicit DeviceScaledGemm(const HostScaledGemmProblem& h)
      : a(h.a.size()),
        b(h.b.size()),
        sa(h.scale_a.size() * 4),
        sb(h.scale_b.size() * 4),
        bias(h.bias.size()),
        c(h.c.size()) {
    copy(a, h.a.data(), h.a.size());
    copy(b, h.b.data(), h.b.size());
    copy(sa, h.scale_a.data(), sa.size());
    copy(sb, h.scale_b.data(), sb.size());
    copy(bias, h.bias.data(), h.bias.size());
    reset_c(h);
  }
  static void copy(DeviceBuffer& d, const void* src, size_t bytes) {
    if (bytes) {
      ASSERT_EQ(cudaMemcpy(d.data(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  void reset_c(const HostScaledGemmProblem& h) { copy(c, h.c.data(), h.c.size()); }
  ScaledGemmOperands operands(const ScaledGemmParams& p) const {
    ScaledGemmOperands o;
    o.a = a.data(), o.b = b.data(), o.c = c.data();
    o.scale_a = reinterpret_cast<const float*>(sa.data());
    o.scale_b = reinterpret_cast<const float*>(sb.data());
    o.bias = p.has_bias() ? bias.data() : nullptr;
    return o;
  }
  std::vector<uint8_t> read_c() const {
    std::vector<uint8_t> out(c.size());
    EXPECT_EQ(cudaMemcpy(out.data(), c.data(), c.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  DeviceBuffer a, b, sa, sb, bias, c;
};

ScaledGemmParams tn(int64_t m, int64_t n, int64_t k, ScaleMode mode, DType out, std::optional<DType> bias,
                    DType b_dtype = DType::kF8E4M3) {
  ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, out, mode, n, k, m);
  p.b_dtype = b_dtype;
  p.bias_dtype = bias;
  return p;
}

// The shapes: random odd ones (most are our kernels' alone: cuBLASLt's FP8 kernels take TN with
// ld multiples of 16), TN shapes cuBLASLt takes in both modes with and without bias, decode
// shapes for the gemv (k not a multiple of 16 behind a padded lda: its scalar tail), an ldc of
// 136 for the padded C, and an m of 200 for the split variants (with an unaligned and an aligned
// ldc).
std::vector<ScaledGemmParams> shapes() {
  std::vector<ScaledGemmParams> v = random_scaled_gemm_shapes(29, 10);
  for (ScaleMode mode : {ScaleMode::kTensorwise, ScaleMode::kRowwise}) {
    v.push_back(tn(256, 192, 320, mode, DType::kBF16, std::nullopt));
    v.push_back(tn(128, 48, 512, mode, DType::kBF16, DType::kBF16));
    v.push_back(tn(96, 64, 256, mode, DType::kF16, DType::kF16));
    v.push_back(tn(64, 32, 256, mode, DType::kF32, DType::kBF16, DType::kF8E5M2));
    for (int64_t n : {1, 3, 8, 16}) {
      ScaledGemmParams g = tn(333, n, 1000, mode, n % 2 ? DType::kBF16 : DType::kF32, std::nullopt);
      g.lda = g.ldb = 1008;
      v.push_back(g.with_defaults());
    }
    ScaledGemmParams padded = tn(128, 32, 128, mode, DType::kF16, std::nullopt);
    padded.ldc = 136;  // aligned m, an ldc that is not a multiple of 64: Fp8_PadC_g64
    v.push_back(padded.with_defaults());
    ScaledGemmParams split = tn(200, 32, 128, mode, DType::kBF16, DType::kBF16);
    v.push_back(split);
    split.ldc = 256;
    v.push_back(split.with_defaults());
  }
  return v;
}

std::vector<ScaledGemmCandidate> all_candidates(Registry& r, const ScaledGemmParams& p) {
  std::vector<ScaledGemmCandidate> out;
  for (const auto& c : r.list<ScaledGemmCandidate>())
    if (c.device == DeviceKind::kCuda) out.push_back(c);
  for (const auto& f : r.list<ScaledGemmCandidateFamily>()) {
    if (f.device != DeviceKind::kCuda) continue;
    for (auto& c : f.expand(p, 1)) {
      auto again = f.resolve(p, c.name);  // names the family wrote must rebuild
      EXPECT_TRUE(again.is_ok()) << c.name << ": " << again.status().to_string();
      if (again.is_ok()) out.push_back(*again);
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::string family_of(const std::string& name) {
  for (const char* f : {"Fp8_LtFast_", "Fp8_Lt_", "Fp8_Gemv_", "Fp8_SplitM", "Fp8_PadC"})
    if (name.rfind(f, 0) == 0) return f;
  return name;
}

TEST(CudaScaledGemm, EveryCandidateMatchesTheFp64Reference) {
  TUNABLEOP_REQUIRE_GPU();
  Registry r;
  register_cuda(r);
  std::map<std::string, int> ran;
  std::map<std::string, double> worst;  // per family, relative to the tolerance
  for (const ScaledGemmParams& shape : shapes()) {
    const HostScaledGemmProblem h = HostScaledGemmProblem::random(shape, uint64_t(shape.m * 31 + shape.k));
    const ScaledGemmParams& p = h.p;
    DeviceScaledGemm dev(h);
    const ScaledGemmReference ref(h);
    const std::vector<ScaledGemmCandidate> cands = all_candidates(r, p);
    ASSERT_FALSE(cands.empty());
    ASSERT_EQ(cands.front().name, "Default");
    for (const auto& c : cands) {
      SCOPED_TRACE(c.name + " " + describe(p));
      if (!c.supports(p).is_ok()) continue;
      dev.reset_c(h);
      ScaledGemmOperands o = dev.operands(p);
      DeviceBuffer ws;
      if (c.workspace_bytes && c.workspace_bytes(p) > 0) {
        ws = DeviceBuffer(c.workspace_bytes(p));
        o.workspace = ws.data();
        o.workspace_bytes = ws.size();
      }
      const Status st = c.run(p, o);
      const cudaError_t e = cudaDeviceSynchronize();
      ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
      if (st.code() == StatusCode::kUnsupported) continue;  // e.g. an algorithm refusing these pointers
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      const std::vector<uint8_t> out = dev.read_c();
      EXPECT_TRUE(ref.matches(out));
      const std::string fam = family_of(c.name);
      ++ran[fam];
      worst[fam] = std::max(worst[fam], ref.error(out) / scaled_gemm_tolerance(p));
    }
  }
  for (const auto& [fam, w] : worst)
    std::printf("worst error / tolerance of %-12s %.3f (%d runs)\n", fam.c_str(), w, ran[fam]);
  for (const char* fam : {"Default", "Fp8_Simt", "Fp8_Gemv_", "Fp8_SplitM", "Fp8_PadC", "Fp8_Lt_", "Fp8_LtFast_"})
    EXPECT_GT(ran[fam], 0) << fam << " never ran";
}

// A candidate that is fast and wrong (Default on the first half of k: twice as fast, far off)
// registered beside the real ones: the tuner must measure it and reject it on numerics.
std::atomic<int> g_wrong_runs{0};

TEST(CudaScaledGemm, AWrongButFastCandidateIsRejected) {
  TUNABLEOP_REQUIRE_GPU();
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kSearchEffort, 0).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5.0).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename,
                      ::testing::TempDir() + "tunableop_cuda_fp8_wrong_" + std::to_string(::getpid()) + "_%d.csv")
                  .is_ok());
  Context ctx(Device::cuda(0), std::move(cfg), [](Registry& r) {
    register_cuda(r);
    ScaledGemmCandidate wrong = cuda::make_scaled_gemm_default();
    wrong.name = "Fp8_Wrong";
    wrong.run = [run = wrong.run](const ScaledGemmParams& p, const ScaledGemmOperands& o) {
      ++g_wrong_runs;
      ScaledGemmParams half = p;
      half.k = p.k / 2;
      return run(half, o);
    };
    r.list<ScaledGemmCandidate>().push_back(std::move(wrong));
  });
  const HostScaledGemmProblem h =
      HostScaledGemmProblem::random(tn(1024, 256, 2048, ScaleMode::kRowwise, DType::kBF16, std::nullopt), 5);
  DeviceScaledGemm dev(h);
  ASSERT_TRUE(scaled_gemm(ctx, h.p, dev.operands(h.p)).is_ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(matches_reference(h, dev.read_c()));
  auto entry = ctx.results().lookup(scaled_gemm_op_signature(h.p), scaled_gemm_params_signature(h.p));
  ASSERT_TRUE(entry.has_value());
  EXPECT_NE(entry->solution, "Fp8_Wrong");
  EXPECT_GE(g_wrong_runs.load(), 1) << "the wrong candidate was never measured";
}

TEST(CudaScaledGemm, TunesOnceThenServes) {
  TUNABLEOP_REQUIRE_GPU();
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5.0).is_ok());
  ASSERT_TRUE(
      cfg.set(Setting::kFilename, ::testing::TempDir() + "tunableop_cuda_fp8_" + std::to_string(::getpid()) + "_%d.csv")
          .is_ok());
  Context ctx(Device::cuda(0), std::move(cfg));
  for (ScaleMode mode : {ScaleMode::kTensorwise, ScaleMode::kRowwise}) {
    const HostScaledGemmProblem h =
        HostScaledGemmProblem::random(tn(512, 8, 4096, mode, DType::kBF16, std::nullopt), 7);
    DeviceScaledGemm dev(h);
    for (int call = 0; call < 2; ++call) {
      dev.reset_c(h);
      ASSERT_TRUE(scaled_gemm(ctx, h.p, dev.operands(h.p)).is_ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(matches_reference(h, dev.read_c())) << "call " << call;
    }
  }
  EXPECT_EQ(ctx.results().size(), 2u);
}

}  // namespace
}  // namespace tunableop::testing
