// GPU time by CUDA events: the one place this project measures it. The tuner's device clock
// (the CUDA runtime's timer), the all-reduce's group timer, the interposer's held timer, the
// engine's timing of its own candidates and its profile all build on these two.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <utility>
#include <vector>

#include "tunableop/status.h"
#include "tunableop/timer.h"

namespace tunableop::cuda {

// Times work queued on one stream with a pair of CUDA events (created on the device current at
// construction). Errors (a faulted stream) read as +inf so that a broken candidate can never
// look fast; last_error() says what happened. stop_ms() = record_stop() + elapsed_ms(): callers
// that must queue something between the two (the interposer's release of its hold) or that
// stop several streams before waiting (a group of ranks) call them apart.
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
  // The SM clock, power and limits of the stream's device, through NVML (nvml_library.h; zeros
  // without it). A GPU's clock falls under sustained load (its power cap), so the tuner times
  // long problems under load (docs/design.md, "Sustained timing").
  DeviceClock device_clock() override;
  bool slows_under_load() const override { return true; }
  cudaError_t last_error() const { return error_; }

  void record_stop();
  double elapsed_ms();  // waits for the stop event; +inf after an error

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cudaError_t error_ = cudaSuccess;
  bool started_ = false;
  int device_ = -1;  // the device current at construction (-1: unknown)
};

// Marks on one stream read after one synchronization: span i lasts from mark(i) to the next
// mark. What timing several candidates back to back (each bracketed by two marks) and a
// profile of a step's kernels need, without waiting between them. Events are destroyed with it.
class EventMarks {
 public:
  explicit EventMarks(cudaStream_t stream) : stream_(stream) {}
  ~EventMarks();
  EventMarks(const EventMarks&) = delete;
  EventMarks& operator=(const EventMarks&) = delete;

  // Records a mark behind the work queued so far; its index.
  StatusOr<size_t> mark();
  // Waits for the stream, then the milliseconds between marks `from` and `to`.
  StatusOr<double> ms(size_t from, size_t to);
  size_t size() const { return events_.size(); }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  bool synced_ = false;
};

// Times `runs` (each one queued call of one candidate) interleaved `reps` times, each run after
// `before` (an L2 flush, say), bracketed by marks: per candidate the median microseconds.
StatusOr<std::vector<double>> time_interleaved_us(const std::vector<std::function<Status()>>& runs, int reps,
                                                  const std::function<Status()>& before, cudaStream_t stream);

}  // namespace tunableop::cuda
