#include <cuda_runtime.h>

#include <chrono>
#include <limits>

#include "cuda_common/event_timer.h"
#include "interpose/held_timer.h"

namespace tunableop::interpose {

namespace {

// Holds the stream until the host writes `seq` (or more) into the mapped flag, or `timeout_ns`
// passed: a host that cannot release it (a full launch queue, a call that synchronizes) costs
// one disturbed sample, never a hang.
__global__ void wait_for_release(const volatile unsigned* flag, unsigned seq, unsigned long long timeout_ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*flag < seq) {
    __nanosleep(256);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) break;
  }
}

class HeldEventTimer : public Timer {
 public:
  static std::unique_ptr<HeldEventTimer> make(cudaStream_t stream) {
    std::unique_ptr<HeldEventTimer> t(new HeldEventTimer(stream));
    if (cudaHostAlloc(reinterpret_cast<void**>(&t->host_flag_), sizeof(unsigned),
                      cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess ||
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&t->device_flag_), t->host_flag_, 0) != cudaSuccess ||
        t->events_.last_error() != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    *t->host_flag_ = 0;
    return t;
  }
  ~HeldEventTimer() override {
    if (host_flag_ != nullptr) {
      release(std::numeric_limits<unsigned>::max());
      (void)cudaStreamSynchronize(stream_);  // no hold may still read the flag
      (void)cudaFreeHost(host_flag_);
    }
    (void)cudaGetLastError();
  }
  HeldEventTimer(const HeldEventTimer&) = delete;
  HeldEventTimer& operator=(const HeldEventTimer&) = delete;

  // A failure spoils one sample (infinite time), as with the event timer; the next starts afresh.
  void start() override {
    ++seq_;
    wait_for_release<<<1, 1, 0, stream_>>>(device_flag_, seq_, kTimeoutNs);
    held_ = cudaGetLastError() == cudaSuccess;
    events_.start();
  }
  double stop_ms() override {
    // "stop" is queued behind the runs before the hold ends: the region is device time only.
    events_.record_stop();
    release(seq_);
    const double ms = events_.elapsed_ms();
    return held_ ? ms : std::numeric_limits<double>::infinity();
  }
  double now_ms() override { return events_.now_ms(); }
  double min_sample_ms() const override { return events_.min_sample_ms(); }
  DeviceClock device_clock() override { return events_.device_clock(); }
  bool slows_under_load() const override { return events_.slows_under_load(); }

 private:
  static constexpr unsigned long long kTimeoutNs = 20'000'000ull;  // 20 ms
  explicit HeldEventTimer(cudaStream_t s) : stream_(s), events_(s) {}
  void release(unsigned v) { __atomic_store_n(host_flag_, v, __ATOMIC_SEQ_CST); }

  cudaStream_t stream_;
  cuda::EventTimer events_;  // the project's one GPU clock (src/cuda_common/event_timer.h)
  unsigned* host_flag_ = nullptr;
  unsigned* device_flag_ = nullptr;
  unsigned seq_ = 0;
  bool held_ = false;  // this sample's hold was queued
};

// Everything but the timer is the wrapped problem's.
class HeldProblem : public TuningProblem {
 public:
  HeldProblem(std::unique_ptr<TuningProblem> p, std::unique_ptr<HeldEventTimer> t)
      : p_(std::move(p)), t_(std::move(t)) {}
  std::string op_signature() const override { return p_->op_signature(); }
  std::string params_signature() const override { return p_->params_signature(); }
  size_t candidate_count() const override { return p_->candidate_count(); }
  std::string candidate_name(size_t i) const override { return p_->candidate_name(i); }
  Status supports(size_t i) override { return p_->supports(i); }
  Status check_numerics(size_t i) override { return p_->check_numerics(i); }
  Status run(size_t i, size_t rotation) override { return p_->run(i, rotation); }
  size_t rotation_count() const override { return p_->rotation_count(); }
  Timer& timer() override { return *t_; }
  Status recover() override { return p_->recover(); }

 private:
  std::unique_ptr<TuningProblem> p_;
  std::unique_ptr<HeldEventTimer> t_;  // destroyed first: its last hold is released
};

}  // namespace

std::unique_ptr<TuningProblem> with_held_timer(std::unique_ptr<TuningProblem> problem, void* stream) {
  auto t = HeldEventTimer::make(static_cast<cudaStream_t>(stream));
  if (t == nullptr) return problem;
  return std::make_unique<HeldProblem>(std::move(problem), std::move(t));
}

}  // namespace tunableop::interpose
