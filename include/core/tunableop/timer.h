// How the tuner reads time. Host clock on CPU, events on a GPU stream, a fake clock in tests.
#pragma once

namespace tunableop {

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;      // begin a timed region (after work already queued)
  virtual double stop_ms() = 0;  // end it, wait for the work, return elapsed milliseconds
  virtual double now_ms() = 0;   // wall clock for budgets (monotonic)
  // Samples shorter than this are batched (several runs between start and stop) so that the
  // clock's resolution and per-sample overhead stay small against the run.
  virtual double min_sample_ms() const { return 0.05; }
};

// Monotonic host clock; the CPU default.
class HostTimer : public Timer {
 public:
  void start() override;
  double stop_ms() override;
  double now_ms() override;

 private:
  double t0_ = 0;
};

}  // namespace tunableop
