#include "backends/cuda/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/kernels/compare_launch.h"
#include "tunableop/tuner.h"

namespace tunableop::cuda {

Status recover_device() {
  cudaError_t last = cudaGetLastError();  // clears a non-sticky error
  cudaError_t sync = cudaDeviceSynchronize();
  if (sync == cudaSuccess) return Status::ok();
  cudaGetLastError();
  cudaError_t again = cudaDeviceSynchronize();
  if (again == cudaSuccess) return Status::ok();
  return Status::device_error(
      fmt::format("the CUDA context is unusable after a sticky error ({}: {}; last error before recovery: {}); "
                  "later GPU work in this process will fail, restart it",
                  cudaGetErrorName(again), cudaGetErrorString(again), cudaGetErrorName(last)));
}

StatusOr<double> replay_graph_ms(const std::function<Status()>& body, cudaStream_t stream) {
  if (!stream) return Status::unsupported("graph replay needs a stream of its own (not the legacy default stream)");
  cudaGraph_t graph = nullptr;
  TUNABLEOP_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status st = body();
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!st.is_ok() || end != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture is not sticky
    return st.is_ok() ? cuda_status(end, "cudaStreamEndCapture") : st;
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_status(e, "cudaGraphInstantiate");
  }
  EventTimer timer(stream);
  std::vector<double> ms;
  e = cudaGraphLaunch(exec, stream);
  for (int s = 0; s < 5 && e == cudaSuccess; ++s) {
    timer.start();
    for (int i = 0; i < 10 && e == cudaSuccess; ++i) e = cudaGraphLaunch(exec, stream);
    const double t = timer.stop_ms();
    if (e == cudaSuccess && timer.last_error() != cudaSuccess) e = timer.last_error();
    ms.push_back(t / 10);
  }
  cudaGraphExecDestroy(exec);
  if (e != cudaSuccess) return cuda_status(e, "cudaGraphLaunch");
  return median(std::move(ms));
}

DeviceRuntime make_cuda_runtime() {
  DeviceRuntime rt;
  rt.kind = DeviceKind::kCuda;
  rt.alloc = [](size_t bytes) -> StatusOr<void*> {
    void* p = nullptr;
    if (bytes == 0) return p;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it for later calls
      return Status::device_error(fmt::format("cudaMalloc({} bytes): {}", bytes, cudaGetErrorString(e)));
    }
    return p;
  };
  rt.free = [](void* p) {
    if (p) cudaFree(p);
  };
  rt.copy = [](void* dst, const void* src, size_t bytes, DeviceRuntime::Copy dir, void* stream) -> Status {
    if (bytes == 0) return Status::ok();
    cudaMemcpyKind kind = dir == DeviceRuntime::Copy::kHostToDevice   ? cudaMemcpyHostToDevice
                          : dir == DeviceRuntime::Copy::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                                      : cudaMemcpyDeviceToDevice;
    auto s = static_cast<cudaStream_t>(stream);
    TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, s));
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(s));
    return Status::ok();
  };
  rt.synchronize = [](void* stream) -> Status {
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return Status::ok();
  };
  rt.make_timer = [](void* stream) -> std::unique_ptr<Timer> {
    return std::make_unique<EventTimer>(static_cast<cudaStream_t>(stream));
  };
  rt.last_level_cache_bytes = []() -> size_t {
    auto info = current_device_info();
    return info.is_ok() ? info->l2_bytes : size_t(50) << 20;
  };
  // Tuning sizes its copies by what the current device has free (issue 33: a batch-128 attention
  // problem asked cudaMalloc for 69 GB on an 80 GB card and failed on every call).
  rt.free_memory_bytes = []() -> uint64_t {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return free;
  };
  rt.recover = [] { return recover_device(); };
  rt.fill_bytes = [](void* dst, int value, size_t bytes, void* stream) -> Status {
    cudaError_t e = cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) return Status::device_error(fmt::format("cudaMemsetAsync: {}", cudaGetErrorString(e)));
    return Status::ok();
  };
  rt.relative_error = [](DType dtype, const void* c, const void* ref, int64_t m, int64_t n, int64_t ldc, int64_t batch,
                         int64_t stride_c, void* stream) -> StatusOr<double> {
    auto s = static_cast<cudaStream_t>(stream);
    double* sums = nullptr;
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&sums), 3 * sizeof(double), s);
    if (e == cudaSuccess) e = cudaMemsetAsync(sums, 0, 3 * sizeof(double), s);
    if (e == cudaSuccess) e = launch_squared_error(dtype, c, ref, m, n, ldc, batch, stride_c, sums, s);
    double host[3] = {0, 0, 0};
    if (e == cudaSuccess) e = cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, s);
    if (sums) cudaFreeAsync(sums, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return Status::device_error(fmt::format("device compare failed: {}", cudaGetErrorString(e)));
    if (host[2] != 0.0 || !std::isfinite(host[0])) return std::numeric_limits<double>::infinity();
    return host[1] == 0.0 ? std::sqrt(host[0]) : std::sqrt(host[0] / host[1]);
  };
  rt.device_count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  };
  rt.set_device = [](int ordinal) -> Status {
    TUNABLEOP_CUDA_TRY(cudaSetDevice(ordinal));
    return Status::ok();
  };
  rt.capturing = [](void* stream) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &st) != cudaSuccess) {
      (void)cudaGetLastError();  // the legacy stream while another captures globally: say yes
      return true;
    }
    return st != cudaStreamCaptureStatusNone;
  };
  rt.replay_ms = [](const std::function<Status()>& body, void* stream) -> StatusOr<double> {
    return replay_graph_ms(body, static_cast<cudaStream_t>(stream));
  };
  // Non-blocking: benchmarks must not serialise against the legacy default stream.
  rt.create_stream = []() -> void* {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return s;
  };
  rt.destroy_stream = [](void* s) {
    if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
  };
  return rt;
}

}  // namespace tunableop::cuda
