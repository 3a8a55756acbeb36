// The FusedLinear op through a CUDA context (GPU-labelled; skips without a GPU): tuned once per
// problem (every output kind, bf16, 1 and 3 tokens), served afterwards, within the op's
// tolerance of the fp64 reference, argmax ids those of the logits it wrote, the choice recorded
// in the results; with TunableOp off, Default runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_testing.h"
#include "ops/framework/elements.h"
#include "ops/fused_linear/reference.h"
#include "tunableop/context.h"
#include "tunableop/fused_linear.h"

namespace tunableop::testing {
namespace {

struct HostData {
  std::vector<uint8_t> w, input, norm, residual;
  std::vector<float> x;
};

HostData random_data(const FusedLinearParams& p, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<double> d(-1, 1);
  HostData h;
  auto fill = [&](std::vector<uint8_t>& v, DType t, int64_t n, double scale) {
    v.resize(size_t(n) * dtype_size(t));
    for (int64_t i = 0; i < n; ++i) store_from_double(t, v.data(), i, scale * d(rng));
  };
  fill(h.w, p.dtype, p.out * p.in, 1);
  fill(h.input, p.dtype, p.tokens * p.in, 1);
  fill(h.norm, p.dtype, p.in, 0.5);
  fill(h.residual, DType::kF32, p.tokens * p.out, 2);
  h.x.resize(size_t(p.tokens * p.in));
  for (auto& v : h.x) v = float(2 * d(rng));
  return h;
}

DeviceBuffer upload(const void* src, size_t bytes) {
  DeviceBuffer b(bytes);
  EXPECT_EQ(cudaMemcpy(b.data(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return b;
}

std::vector<uint8_t> download(const DeviceBuffer& b, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), b.data(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// Runs p through ctx twice (the first call tunes when tuning is on) and checks the result.
void run_and_check(Context& ctx, const FusedLinearParams& p) {
  SCOPED_TRACE(fused_linear_params_signature(p));
  HostData h = random_data(p, uint64_t(p.out * 31 + p.tokens));
  const size_t es = dtype_size(p.dtype);
  DeviceBuffer w = upload(h.w.data(), h.w.size()), in = upload(h.input.data(), h.input.size());
  DeviceBuffer x = upload(h.x.data(), h.x.size() * 4), nw = upload(h.norm.data(), h.norm.size());
  const size_t y_es = p.output == FusedOutput::kStoreF32 ? 4 : es;
  DeviceBuffer y(size_t(p.tokens * p.out) * y_es), gated(size_t(p.tokens * p.out / 2) * es), ids(size_t(p.tokens) * 4);
  for (int call = 0; call < 2; ++call) {
    DeviceBuffer res = upload(h.residual.data(), h.residual.size());
    FusedLinearOperands o;
    o.w = w.data();
    o.input = in.data();
    o.x = reinterpret_cast<const float*>(x.data());
    o.norm = nw.data();
    o.y = y.data();
    o.residual = reinterpret_cast<float*>(res.data());
    o.gated = gated.data();
    o.ids = reinterpret_cast<int32_t*>(ids.data());
    Status st = fused_linear(ctx, p, o);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> ref = fused_linear_reference_f64(p, h.w.data(), h.input.data(), h.x.data(), h.norm.data(),
                                                               reinterpret_cast<const float*>(h.residual.data()));
    std::vector<uint8_t> out = p.output == FusedOutput::kAddResidual ? download(res, h.residual.size())
                               : p.gated()                           ? download(gated, gated.size())
                                                                     : download(y, y.size());
    const DType t = p.output == FusedOutput::kAddResidual || p.output == FusedOutput::kStoreF32 ? DType::kF32 : p.dtype;
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double v = load_as_double(t, out.data(), int64_t(i));
      ASSERT_TRUE(std::isfinite(v)) << i;
      num += (v - ref[i]) * (v - ref[i]);
      den += ref[i] * ref[i];
    }
    EXPECT_LE(std::sqrt(num / den), fused_linear_tolerance(p)) << "call " << call;
    if (p.output == FusedOutput::kArgmax) {
      std::vector<uint8_t> raw = download(ids, ids.size());
      std::vector<int32_t> got(size_t(p.tokens));
      std::memcpy(got.data(), raw.data(), raw.size());
      EXPECT_EQ(got, fused_linear_argmax(p, out.data()));
    }
  }
}

FusedLinearParams make(int64_t out, int64_t in, int64_t tokens, FusedInput input, FusedOutput output) {
  FusedLinearParams p;
  p.dtype = DType::kBF16;
  p.out = out;
  p.in = in;
  p.tokens = tokens;
  p.input = input;
  p.output = output;
  return p;
}

const std::vector<FusedLinearParams>& problems() {
  static const std::vector<FusedLinearParams> v = {
      make(640, 512, 1, FusedInput::kRmsNormPlusOne, FusedOutput::kStore),
      make(512, 1024, 3, FusedInput::kPlain, FusedOutput::kAddResidual),
      make(515, 1024, 2, FusedInput::kPlain, FusedOutput::kStoreF32),
      make(1030, 512, 1, FusedInput::kRmsNorm, FusedOutput::kGatedSilu),
      make(1030, 512, 3, FusedInput::kRmsNormPlusOne, FusedOutput::kGatedGeluTanh),
      make(5003, 256, 3, FusedInput::kRmsNorm, FusedOutput::kArgmax),
  };
  return v;
}

TEST(CudaFusedLinear, TunesOnceAndServes) {
  TUNABLEOP_REQUIRE_GPU();
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename,
                      ::testing::TempDir() + "tunableop_cuda_fused_" + std::to_string(::getpid()) + "_%d.csv")
                  .is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5.0).is_ok());
  Context ctx(Device::cuda(0), std::move(cfg));
  for (const FusedLinearParams& p : problems()) run_and_check(ctx, p);
  EXPECT_EQ(ctx.results().size(), problems().size());
  auto plan = make_plan(ctx, problems()[0]);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_NE(plan->solution(), "");  // decided at the first call; a plan of the problem serves it
}

TEST(CudaFusedLinear, DefaultWhenTunableOpIsOff) {
  TUNABLEOP_REQUIRE_GPU();
  Context ctx(Device::cuda(0), Config::defaults_only());
  for (const FusedLinearParams& p : problems()) run_and_check(ctx, p);
  EXPECT_EQ(ctx.results().size(), 0u);
  FusedLinearParams bad = problems()[0];
  bad.tokens = 9;  // past the fused kernels' regime: refused with a message
  Status st = fused_linear(ctx, bad, FusedLinearOperands{});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
}

}  // namespace
}  // namespace tunableop::testing
