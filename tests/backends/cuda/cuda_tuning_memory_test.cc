// Tuning memory on a GPU against cudaMemGetInfo (issue 33, finding 3): with most of the device
// held by the test (as a large KV cache holds it), a problem whose rotating copies would not all
// fit is tuned with fewer of them, and one whose single set of copies does not fit is not tuned
// at all: gemm() still computes it (Default), the context remembers it (tried once, however often
// its generation moves), writes it to the untuned file and says so once at verbose 1. Before, the
// batch-128 prefill attention problem asked cudaMalloc for 69 GB on every call and stalled the run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_testing.h"
#include "ops/gemm/dispatch.h"
#include "tunableop/context.h"

namespace tunableop::testing {
namespace {

size_t free_device_bytes() {
  size_t f = 0, t = 0;
  EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);
  return f;
}

// Holds all but `leave` bytes of the device's free memory until destroyed.
struct DeviceHog {
  explicit DeviceHog(size_t leave) {
    const size_t free = free_device_bytes();
    if (free > leave) EXPECT_EQ(cudaMalloc(&p, free - leave), cudaSuccess);
  }
  ~DeviceHog() {
    if (p) cudaFree(p);
  }
  void* p = nullptr;
};

TEST(CudaTuningMemory, CopiesShrinkToTheFreeMemoryAndWhatDoesNotFitIsTriedOnce) {
  TUNABLEOP_REQUIRE_GPU();
  const auto dir = std::filesystem::temp_directory_path() / ("tunableop_cuda_memory_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Config cfg = Config::defaults_only();
  ASSERT_TRUE(cfg.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kFilename, (dir / "r%d.csv").string()).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kUntunedFilename, (dir / "u%d.csv").string()).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxTuningDurationMs, 5).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kMaxWarmupDurationMs, 2).is_ok());
  ASSERT_TRUE(cfg.set(Setting::kRotatingBufferSize, 2048).is_ok());  // ask for many copies
  ASSERT_TRUE(cfg.set(Setting::kVerbose, 2).is_ok());
  Context ctx(Device::cuda(0), std::move(cfg));
  std::vector<std::string> log;
  ctx.log().set_sink([&](const std::string& l) { log.push_back(l); });
  auto count = [&](const std::string& what) {
    int n = 0;
    for (const auto& l : log) n += l.find(what) != std::string::npos;
    return n;
  };
  // Handles, workspaces and the library's own state first, so that the hog leaves what it says.
  {
    GemmParams warm = linear_params(DType::kBF16, 8, 256, 256).with_defaults();
    HostGemmProblem prob = HostGemmProblem::random(warm, 1);
    DeviceGemm dev(prob);
    ASSERT_TRUE(gemm(ctx, warm, dev.operands()).is_ok());
  }

  // A 64 MiB set (A: 4096 x 8192 bf16): 2 GiB of copies asked for, about 360 MiB usable.
  const GemmParams mid = linear_params(DType::kBF16, 16, 8192, 4096).with_defaults();
  HostGemmProblem mid_prob = HostGemmProblem::random(mid, 2);
  DeviceGemm mid_dev(mid_prob);
  // A 1 GiB set (A: 32768 x 16384 bf16): does not fit at all. Its operands are made before the hog.
  const GemmParams big = linear_params(DType::kBF16, 16, 16384, 32768).with_defaults();
  DeviceBuffer big_a(size_t(big.m) * big.k * 2), big_b_dev(size_t(big.k) * big.n * 2),
      big_c_dev(size_t(big.m) * big.n * 2);
  ASSERT_EQ(cudaMemset(big_a.data(), 0, big_a.size()), cudaSuccess);
  ASSERT_EQ(cudaMemset(big_b_dev.data(), 0, big_b_dev.size()), cudaSuccess);
  const GemmOperands big_ops{big_a.data(), big_b_dev.data(), big_c_dev.data()};

  DeviceHog hog(size_t(480) << 20);
  ASSERT_TRUE(gemm(ctx, mid, mid_dev.operands()).is_ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(matches_reference(mid_prob, mid_dev.read_c()));
  EXPECT_TRUE(ctx.results().contains(gemm_op_signature(mid), gemm_params_signature(mid)));
  EXPECT_EQ(count("rotating copies instead of"), 1) << "fewer copies, said at verbose 2";

  for (int call = 0; call < 3; ++call) {
    ASSERT_TRUE(gemm(ctx, big, big_ops).is_ok()) << "call " << call;  // Default computes it
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (call == 0) {  // another result moves the generation: the big problem is not tried again
      GemmParams other = linear_params(DType::kBF16, 4, 512, 384).with_defaults();
      HostGemmProblem prob = HostGemmProblem::random(other, 3);
      DeviceGemm dev(prob);
      ASSERT_TRUE(gemm(ctx, other, dev.operands()).is_ok());
    }
  }
  EXPECT_EQ(ctx.tuning_failure(gemm_op_signature(big), gemm_params_signature(big)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(count("cannot tune " + gemm_op_signature(big) + "(" + gemm_params_signature(big) + ") here"), 1);
  std::ifstream in(dir / "u0.csv");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(gemm_params_signature(big)), std::string::npos) << "recorded for `tunableop tune`";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "no failed cudaMalloc left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tunableop::testing
