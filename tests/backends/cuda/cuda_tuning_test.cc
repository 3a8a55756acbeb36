// The CUDA backend inside a Context: tuning through gemm() with planted bad candidates, device
// memory that does not grow over many tunings, the runtime's copies/timer/recovery, and a
// sticky fault reported as such (in a child process: it poisons the CUDA context for good).
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cuda/cuda_testing.h"
#include "backends/cuda/register.h"
#include "backends/cuda/runtime.h"
#include "cuda_common/nvml_library.h"
#include "ops/gemm/dispatch.h"
#include "tunableop/context.h"
#include "tunableop/op_tools.h"

namespace tunableop::testing {
namespace {

std::string temp_results_path(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / ("tunableop_cuda_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / (tag + "%d.csv")).string();
}

Config tuning_config(const std::string& tag) {
  Config cfg = Config::defaults_only();
  EXPECT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kTuning, true).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kFilename, temp_results_path(tag)).is_ok());
  EXPECT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5).is_ok());  // keep the test quick
  EXPECT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, 2).is_ok());
  return cfg;
}

// A candidate that leaves a (non-sticky) CUDA error behind and reports failure, and one that is
// fast and wrong. Neither may win; later calls must still work.
void register_with_bad_candidates(Registry& r) {
  register_cuda(r);
  GemmCandidate faulty;
  faulty.name = "Gemm_TestFaulty";
  faulty.device = DeviceKind::kCuda;
  faulty.supports = [](const GemmParams&) { return Status::ok(); };
  faulty.run = [](const GemmParams&, const GemmOperands&) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size_t(1) << 60);  // fails; the error stays until cleared
    return Status::device_error(std::string("planted failure: ") + cudaGetErrorName(e));
  };
  r.list<GemmCandidate>().push_back(faulty);
  GemmCandidate wrong;
  wrong.name = "Gemm_TestWrongFast";
  wrong.device = DeviceKind::kCuda;
  wrong.supports = [](const GemmParams&) { return Status::ok(); };
  wrong.run = [](const GemmParams& p, const GemmOperands& o) {
    size_t bytes = size_t(p.c_span()) * dtype_size(p.dtype);
    cudaError_t e = cudaMemsetAsync(o.c, 0, bytes, static_cast<cudaStream_t>(o.stream));
    return e == cudaSuccess ? Status::ok() : Status::device_error(cudaGetErrorString(e));
  };
  r.list<GemmCandidate>().insert(r.list<GemmCandidate>().begin() + 1, wrong);
}

TEST(CudaTuning, BadCandidatesNeverWinAndLeaveContextUsable) {
  TUNABLEOP_REQUIRE_GPU();
  Context ctx(Device::cuda(0), tuning_config("bad"), register_with_bad_candidates);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    GemmParams p = linear_params(dt, 4, 512, 384).with_defaults();
    HostGemmProblem prob = HostGemmProblem::random(p, 3);
    DeviceGemm dev(prob);
    for (int call = 0; call < 3; ++call) {  // tune, then two hits
      dev.reset_c(prob);
      Status st = gemm(ctx, p, dev.operands());
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(matches_reference(prob, dev.read_c())) << "call " << call;
    }
    auto e = ctx.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->solution, "Gemm_TestFaulty");
    EXPECT_NE(e->solution, "Gemm_TestWrongFast");
    std::printf("  %s %s -> %s (%.4f ms)\n", gemm_op_signature(p).c_str(), gemm_params_signature(p).c_str(),
                e->solution.c_str(), e->time_ms);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "an error was left behind";
}

// Device memory after many tunings equals memory after the first (handles, cuBLAS workspaces and
// our scratch buffers are created once): rotating copies, workspaces and events are released.
TEST(CudaTuning, NoDeviceMemoryGrowthOverManyTunings) {
  TUNABLEOP_REQUIRE_GPU();
  Context ctx(Device::cuda(0), tuning_config("leak"));
  auto free_bytes = [] {
    size_t f = 0, t = 0;
    EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);
    return f;
  };
  auto tune = [&](int64_t m, int64_t n) {
    auto rep = tune_gemm(ctx, linear_params(DType::kBF16, n, 1024, m), true);
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  };
  tune(1000, 3);
  tune(1024, 64);
  const size_t after_first = free_bytes();
  for (int i = 0; i < 12; ++i) tune(1000 + 8 * i, i % 2 ? 3 : 64);
  const size_t after_many = free_bytes();
  const double grown_mib = (double(after_first) - double(after_many)) / (1 << 20);
  std::printf("  device memory change over 12 tunings: %.1f MiB\n", grown_mib);
  EXPECT_LT(grown_mib, 32.0);  // one leaked rotating set would be > 60 MiB (L2-sized)
}

TEST(CudaRuntime, CopiesTimerAndRecovery) {
  TUNABLEOP_REQUIRE_GPU();
  DeviceRuntime rt = cuda::make_cuda_runtime();
  EXPECT_GT(rt.last_level_cache_bytes(), size_t(1) << 20);
  EXPECT_GE(rt.device_count(), 1);
  void* stream = rt.create_stream();
  ASSERT_NE(stream, nullptr);
  std::vector<float> host(1 << 20), back(1 << 20);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f;
  auto d = rt.alloc(host.size() * 4);
  ASSERT_TRUE(d.is_ok());
  ASSERT_TRUE(rt.copy(*d, host.data(), host.size() * 4, DeviceRuntime::Copy::kHostToDevice, stream).is_ok());
  ASSERT_TRUE(rt.copy(back.data(), *d, host.size() * 4, DeviceRuntime::Copy::kDeviceToHost, stream).is_ok());
  EXPECT_EQ(host, back);

  auto timer = rt.make_timer(stream);
  timer->start();
  for (int i = 0; i < 20; ++i) cudaMemsetAsync(*d, i, host.size() * 4, static_cast<cudaStream_t>(stream));
  double ms = timer->stop_ms();
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 1000.0);
  EXPECT_GT(timer->min_sample_ms(), 0.0);

  void* huge = nullptr;
  EXPECT_NE(cudaMalloc(&huge, size_t(1) << 60), cudaSuccess);  // non-sticky error
  EXPECT_TRUE(rt.recover().is_ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  rt.free(*d);
  rt.destroy_stream(stream);
}

// A GEMM reading an unmapped address poisons the CUDA context; recover() must say so plainly.
// Runs in a re-executed child ("threadsafe" death test), so this process keeps its context.
TEST(CudaRuntimeDeathTest, StickyFaultIsReported) {
  TUNABLEOP_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    Registry r;
    register_cuda(r);
    GemmParams p = linear_params(DType::kF32, 64, 256, 256).with_defaults();
    GemmOperands o;
    o.a = reinterpret_cast<const void*>(uintptr_t(0x10000));  // never mapped
    o.b = o.a;
    void* c = nullptr;
    cudaMalloc(&c, 256 * 64 * 4);
    o.c = c;
    Status st = r.list<GemmCandidate>().front().run(p, o);
    cudaDeviceSynchronize();
    Status rec = r.runtime(DeviceKind::kCuda)->recover();
    std::fprintf(stderr, "run: %s; recover: %s\n", st.to_string().c_str(), rec.to_string().c_str());
    std::exit(!rec.is_ok() && rec.message().find("sticky") != std::string::npos ? 0 : 1);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "unusable after a sticky error");
}

// Sustained timing on the GPU (docs/design.md): a problem whose Default call is long enough has
// its final rounds timed after the finalists heated the GPU, within the heat budget, with the
// SM clock and power recorded (where NVML is there); a short one keeps the fast path.
TEST(CudaTuning, LongProblemsRunTheirFinalRoundsUnderSustainedLoad) {
  TUNABLEOP_REQUIRE_GPU();
  Config cfg = tuning_config("sustained");
  ASSERT_TRUE(cfg.set(Setting::kSustainedMinCallMs, 0.05).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kSustainedHeatMs, 150).is_ok());
  Context ctx(Device::cuda(0), cfg, register_cuda);
  const bool nvml = cuda::nvml_api().is_ok();
  // Llama-2-7B's down projection over 2048 tokens (~0.25 ms on an H100) and at one token (~10 us).
  const GemmParams big = linear_params(DType::kBF16, 2048, 11008, 4096).with_defaults();
  auto rep = OpTools<GemmOp>::tune(ctx, big, /*retune=*/true);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  const ResultEntry& w = rep->winner;
  EXPECT_EQ(w.final_rounds, "sustained") << "Default took " << w.default_ms << " ms a call";
  EXPECT_LT(w.tuning_ms, 2000) << "the heat is bounded by its 150 ms budget";
  if (nvml) {
    EXPECT_GT(w.sm_mhz, 100);
    EXPECT_GT(w.power_w, 10);
  } else {
    EXPECT_EQ(w.sm_mhz, 0) << "no NVML: unknown, never a failure";
  }
  std::stringstream stats_text;
  stats_text << std::ifstream(ctx.results_path() + ".stats").rdbuf();
  const std::string stats = stats_text.str();
  EXPECT_NE(stats.find(",sustained,"), std::string::npos) << stats;

  const GemmParams small = linear_params(DType::kBF16, 1, 11008, 4096).with_defaults();
  auto rep_small = OpTools<GemmOp>::tune(ctx, small, /*retune=*/true);
  ASSERT_TRUE(rep_small.is_ok()) << rep_small.status().to_string();
  EXPECT_EQ(rep_small->winner.final_rounds, "burst") << "Default took " << rep_small->winner.default_ms << " ms";
}

}  // namespace
}  // namespace tunableop::testing
