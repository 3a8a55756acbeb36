// How the tuner reads time. Host clock on CPU, events on a GPU stream, a fake clock in tests.
#pragma once

namespace tunableop {

// What the device runs at while it is timed, where it can say: a GPU's SM clock and board power
// (NVML, opened at run time) and whether a power or thermal limit holds the clock down. Zeros
// and false where unknown (the host clock; a GPU without NVML): reading it never fails.
struct DeviceClock {
  double sm_mhz = 0;
  double power_w = 0;
  bool limited = false;  // a power or thermal cap holds the clock below what the device asks for
  bool known() const { return sm_mhz > 0; }
};

class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;      // begin a timed region (after work already queued)
  virtual double stop_ms() = 0;  // end it, wait for the work, return elapsed milliseconds
  virtual double now_ms() = 0;   // wall clock for budgets (monotonic)
  // Samples shorter than this are batched (several runs between start and stop) so that the
  // clock's resolution and per-sample overhead stay small against the run.
  virtual double min_sample_ms() const { return 0.05; }
  // The device's clock now (between samples: a reading costs tens of microseconds). The tuner
  // records it during its final rounds and, under sustained load, stops heating the device once
  // it reports a limit (docs/design.md, "Sustained timing"). Tests inject a fake device clock here.
  virtual DeviceClock device_clock() { return {}; }
  // Whether the timed device's clock falls under sustained load (a GPU at its power cap): the
  // tuner then times long problems under load. The host clock says no: CPU tuning keeps its
  // fast path (a CPU's turbo budget is real too, but unmeasured here).
  virtual bool slows_under_load() const { return false; }
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
