// The CUDA DeviceRuntime: device memory, copies, CUDA-event timers and error recovery, all on
// the current CUDA device (a context is bound to one ordinal; the caller makes it current).
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "tunableop/registry.h"
#include "tunableop/timer.h"

namespace tunableop::cuda {

// Times work queued on one stream with a pair of CUDA events. Errors (a faulted stream) read
// as +inf so that a broken candidate can never look fast; last_error() says what happened.
class EventTimer : public Timer {
 public:
  explicit EventTimer(cudaStream_t stream);
  ~EventTimer() override;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() override;
  double stop_ms() override;
  double now_ms() override;
  // Event resolution is ~0.5 us and a record costs a few us of launch slot, so samples shorter
  // than this are batched by the tuner.
  double min_sample_ms() const override { return 0.03; }
  cudaError_t last_error() const { return error_; }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cudaError_t error_ = cudaSuccess;
};

DeviceRuntime make_cuda_runtime();

// Captures `body` on `stream` once, replays the graph (one warm-up, then 5 samples of 10
// replays timed with events) and returns the median milliseconds per replay: DeviceRuntime::
// replay_ms on CUDA, and the attention lab's graph column.
StatusOr<double> replay_graph_ms(const std::function<Status()>& body, cudaStream_t stream);

// Clears a recoverable error; a sticky one (illegal address, ...) cannot be cleared inside the
// process and is reported as such.
Status recover_device();

}  // namespace tunableop::cuda
