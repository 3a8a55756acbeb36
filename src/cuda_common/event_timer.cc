#include "cuda_common/event_timer.h"

#include <chrono>
#include <limits>

#include "cuda_common/cuda_check.h"
#include "cuda_common/nvml_library.h"
#include "tunableop/tuner.h"

namespace tunableop::cuda {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {
  if (cudaGetDevice(&device_) != cudaSuccess) {
    (void)cudaGetLastError();
    device_ = -1;
  }
  error_ = cudaEventCreate(&start_);
  if (error_ == cudaSuccess) error_ = cudaEventCreate(&stop_);
}

EventTimer::~EventTimer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

void EventTimer::start() {
  started_ = false;
  if (!start_ || !stop_) return;
  cudaError_t e = cudaEventRecord(start_, stream_);
  if (e != cudaSuccess) error_ = e;
  started_ = e == cudaSuccess;
}

void EventTimer::record_stop() {
  if (!start_ || !stop_) return;
  cudaError_t e = cudaEventRecord(stop_, stream_);
  if (e != cudaSuccess) {
    error_ = e;
    started_ = false;
  }
}

double EventTimer::elapsed_ms() {
  constexpr double kBroken = std::numeric_limits<double>::infinity();
  if (!start_ || !stop_ || !started_) return kBroken;
  cudaError_t e = cudaEventSynchronize(stop_);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start_, stop_);
  if (e != cudaSuccess) {
    error_ = e;
    return kBroken;
  }
  return double(ms);
}

double EventTimer::stop_ms() {
  record_stop();
  return elapsed_ms();
}

DeviceClock EventTimer::device_clock() { return device_ < 0 ? DeviceClock{} : read_device_clock(device_); }

double EventTimer::now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

EventMarks::~EventMarks() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

StatusOr<size_t> EventMarks::mark() {
  cudaEvent_t e = nullptr;
  TUNABLEOP_CUDA_TRY(cudaEventCreate(&e));
  events_.push_back(e);
  TUNABLEOP_CUDA_TRY(cudaEventRecord(e, stream_));
  synced_ = false;
  return events_.size() - 1;
}

StatusOr<double> EventMarks::ms(size_t from, size_t to) {
  if (from >= events_.size() || to >= events_.size()) return Status::internal("EventMarks: no such mark");
  if (!synced_) {
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
    synced_ = true;
  }
  float ms = 0;
  TUNABLEOP_CUDA_TRY(cudaEventElapsedTime(&ms, events_[from], events_[to]));
  return double(ms);
}

StatusOr<std::vector<double>> time_interleaved_us(const std::vector<std::function<Status()>>& runs, int reps,
                                                  const std::function<Status()>& before, cudaStream_t stream) {
  EventMarks marks(stream);
  std::vector<std::vector<std::pair<size_t, size_t>>> spans(runs.size());
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t c = 0; c < runs.size(); ++c) {
      if (before) TUNABLEOP_RETURN_IF_ERROR(before());
      auto a = marks.mark();
      if (!a.is_ok()) return a.status();
      TUNABLEOP_RETURN_IF_ERROR(runs[c]());
      auto b = marks.mark();
      if (!b.is_ok()) return b.status();
      spans[c].emplace_back(*a, *b);
    }
  }
  std::vector<double> us;
  for (const auto& s : spans) {
    std::vector<double> t;
    for (const auto& [a, b] : s) {
      auto ms = marks.ms(a, b);
      if (!ms.is_ok()) return ms.status();
      t.push_back(*ms * 1e3);
    }
    us.push_back(median(std::move(t)));
  }
  return us;
}

}  // namespace tunableop::cuda
