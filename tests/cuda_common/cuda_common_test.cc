// src/cuda_common: CUDA errors as Status, and the owning handles (device/pinned memory, stream,
// graph) on a real device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"
#include "cuda_common/event_timer.h"
#include "cuda_common/nvml_library.h"

namespace tunableop::cuda {
namespace {

// Needs no device: the runtime names its error codes without one.
TEST(CudaCommon, ErrorsBecomeDeviceErrorsNamingTheCall) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "cudaFree(p)").is_ok());
  Status st = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc(&p, 8)");
  EXPECT_EQ(st.code(), StatusCode::kDeviceError);
  EXPECT_EQ(st.message().rfind("cudaMalloc(&p, 8): ", 0), 0u) << st.message();
  EXPECT_NE(st.message().find("(cudaErrorMemoryAllocation)"), std::string::npos) << st.message();
}

bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no usable CUDA device"

TEST(CudaCommon, DeviceBufferGrowsNeverShrinksAndReleases) {
  REQUIRE_GPU();
  DeviceBuffer b;
  EXPECT_EQ(b.get(), nullptr);
  EXPECT_EQ(b.bytes(), 0u);
  ASSERT_TRUE(b.ensure(256).is_ok());
  void* first = b.get();
  EXPECT_NE(first, nullptr);
  ASSERT_TRUE(b.ensure(64).is_ok());
  EXPECT_EQ(b.get(), first) << "a smaller request keeps the block";
  ASSERT_TRUE(b.ensure(1 << 20).is_ok());
  EXPECT_EQ(b.bytes(), size_t(1) << 20);
  DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.get(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.bytes(), size_t(1) << 20);
  void* raw = moved.release();
  EXPECT_EQ(moved.get(), nullptr);
  EXPECT_EQ(cudaFree(raw), cudaSuccess);
  // An impossible size is an error (cleared, so later calls work), not a crash.
  Status st = b.ensure(size_t(1) << 62);
  EXPECT_EQ(st.code(), StatusCode::kDeviceError);
  EXPECT_NE(st.message().find("cudaMalloc("), std::string::npos) << st.message();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(b.ensure(16).is_ok());
}

// Pinned memory, a stream and a captured graph together: the graph sets device bytes, is
// replayed, and the copy back through pinned memory sees them.
TEST(CudaCommon, StreamGraphAndPinnedCopy) {
  REQUIRE_GPU();
  Stream s;
  ASSERT_TRUE(s.create().is_ok());
  DeviceBuffer d;
  PinnedBuffer h;
  ASSERT_TRUE(d.ensure(64).is_ok());
  ASSERT_TRUE(h.ensure(64).is_ok());
  ASSERT_EQ(cudaMemsetAsync(d.get(), 0, 64, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d.get(), 0x5a, 64, s.get()), cudaSuccess);
  GraphExec g;
  ASSERT_TRUE(g.end_capture(s.get()).is_ok());
  // Capturing queued nothing: the memory is still zero.
  ASSERT_EQ(cudaMemcpyAsync(h.get(), d.get(), 64, cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  EXPECT_EQ(static_cast<uint8_t*>(h.get())[7], 0);
  ASSERT_TRUE(g.launch(s.get()).is_ok());
  ASSERT_EQ(cudaMemcpyAsync(h.get(), d.get(), 64, cudaMemcpyDeviceToHost, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(static_cast<uint8_t*>(h.get())[i], 0x5a) << i;
}

TEST(CudaCommon, FailedCaptureIsReportedAndCleared) {
  REQUIRE_GPU();
  Stream s;
  ASSERT_TRUE(s.create().is_ok());
  GraphExec g;
  // Not capturing: ending a capture is an error the helper returns (and clears).
  Status st = g.end_capture(s.get());
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("cudaStreamEndCapture"), std::string::npos) << st.message();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// NVML (nvml_library.h): absent, it is an answer, never a failure.
TEST(CudaCommon, NvmlThatCannotBeOpenedSaysWhyAndReadsAsUnknown) {
  auto api = open_nvml({"/nonexistent/libnvidia-ml.so.1"});
  ASSERT_FALSE(api.is_ok());
  EXPECT_TRUE(api.status().is_unsupported());
  EXPECT_NE(api.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << api.status().message();
  EXPECT_FALSE(open_nvml({}).is_ok());
  if (!have_gpu()) {
    EXPECT_FALSE(read_device_clock(0).known()) << "no device: zeros";
    return;
  }
  EXPECT_FALSE(read_device_clock(1 << 20).known()) << "no such ordinal: zeros";
}

// On a GPU machine with the driver's NVML: the SM clock and board power of the timer's device,
// the numbers the tuner's log and `.stats` sidecar record.
TEST(CudaCommon, EventTimerReadsTheDevicesClockAndPowerThroughNvml) {
  REQUIRE_GPU();
  auto api = nvml_api();
  if (!api.is_ok()) GTEST_SKIP() << api.status().to_string();
  Stream s;
  ASSERT_TRUE(s.create().is_ok());
  EventTimer t(s.get());
  EXPECT_TRUE(t.slows_under_load());
  const DeviceClock c = t.device_clock();
  EXPECT_GT(c.sm_mhz, 100) << "an SM clock in MHz";
  EXPECT_LT(c.sm_mhz, 5000);
  EXPECT_GT(c.power_w, 10) << "a board's power in W";
  EXPECT_LT(c.power_w, 2000);
}

}  // namespace
}  // namespace tunableop::cuda
