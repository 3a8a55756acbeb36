// A TuningProblem whose candidates cost a known number of fake milliseconds per run, on a fake
// clock: budgets, pruning, the margin rule and failure handling can be checked exactly.
#pragma once

#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tunableop/tuner.h"

namespace tunableop::testing {

// Fake time, and a fake GPU that drops its frequency after `boost_ms` of load (what a real one
// does at its power cap: docs/results/attention, stage 12): from then on its runs cost their
// candidates' hot costs and its clock reads capped_mhz at a power limit, until idle() cools it.
// Fake time passes only through runs (and idle()), so the device is under load from the first
// run on. With gpu false (the default) it is a host clock: it never reads a device clock and
// its timer does not slow under load.
struct FakeClock {
  double now = 0;
  bool gpu = false;
  bool reports_clock = true;  // false: a GPU without NVML (clock readings unknown)
  double boost_ms = std::numeric_limits<double>::infinity();
  double boost_mhz = 1980, capped_mhz = 1755;
  double boost_w = 500, capped_w = 700;
  double load_since = 0;
  bool hot() const { return gpu && now - load_since >= boost_ms; }
  void idle(double ms) {
    now += ms;
    load_since = now;
  }
};

class FakeTimer : public Timer {
 public:
  FakeTimer(FakeClock& clock, double min_sample_ms) : clock_(clock), min_sample_ms_(min_sample_ms) {}
  void start() override { t0_ = clock_.now; }
  double stop_ms() override { return clock_.now - t0_; }
  double now_ms() override { return clock_.now; }
  double min_sample_ms() const override { return min_sample_ms_; }
  DeviceClock device_clock() override {
    ++clock_reads;
    if (!clock_.gpu || !clock_.reports_clock) return {};
    const bool hot = clock_.hot();
    return {hot ? clock_.capped_mhz : clock_.boost_mhz, hot ? clock_.capped_w : clock_.boost_w, hot};
  }
  bool slows_under_load() const override { return clock_.gpu; }
  int clock_reads = 0;

 private:
  FakeClock& clock_;
  double min_sample_ms_;
  double t0_ = 0;
};

struct FakeCandidate {
  FakeCandidate(std::string n, double cost = 1.0, Status s = Status::ok(), bool numerics = true)
      : name(std::move(n)), cost_ms(cost), support(std::move(s)), numerics_ok(numerics) {}
  std::string name;
  double cost_ms = 1.0;
  Status support;           // ok, or why not
  bool numerics_ok = true;  // false: a wrong result (check_numerics fails)
  int fail_on_run = 0;      // run() fails on this (1-based) call and every later one; 0: never
  double noise = 0;         // relative amplitude of deterministic noise on each run
  int lucky_every = 0;      // every Nth run takes lucky_cost_ms instead (lucky or, above cost_ms, a spike)
  double lucky_cost_ms = 0;
  double spike_probability = 0;  // each run is, with this probability, spike_factor times slower
  double spike_factor = 1;
  // Multiplies the cost of run n (1-based, counting this candidate's runs only): load that hits
  // this candidate and not the others (a two-thread candidate while another process holds a
  // core), or one that was fast only while screened. Null: 1.
  std::function<double(int run)> run_factor;
  // Cost per run once the fake device dropped its frequency (FakeClock::boost_ms); 0: cost_ms
  // scaled by the clocks' ratio (a kernel whose time follows the clock).
  double hot_cost_ms = 0;
};

// A problem whose candidates cost a known number of fake milliseconds per run.
class FakeProblem : public TuningProblem {
 public:
  // drift_per_s: the machine slows down by this fraction per fake second (every run's cost is
  // scaled by 1 + drift_per_s * now / 1000), as a warming GPU or a growing load would.
  explicit FakeProblem(std::vector<FakeCandidate> c, double min_sample_ms = 0.05, uint64_t seed = 7,
                       double drift_per_s = 0)
      : cands_(std::move(c)),
        timer_(clock_, min_sample_ms),
        rng_(seed),
        runs_(cands_.size()),
        checks_(cands_.size()),
        started_at_(cands_.size(), -1),
        drift_per_s_(drift_per_s) {}

  std::string op_signature() const override { return "GemmTunableOp_float_NN"; }
  std::string params_signature() const override { return "nn_8_8_8"; }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override {
    started_at_[i] = clock_.now;
    return cands_[i].support;
  }
  Status check_numerics(size_t i) override {
    ++checks_[i];
    clock_.now += cands_[i].cost_ms;
    return cands_[i].numerics_ok ? Status::ok() : Status::numerics("planted wrong result");
  }
  Status run(size_t i, size_t rotation) override {
    const FakeCandidate& c = cands_[i];
    int n = ++runs_[i];
    rotations_.insert(rotation % rotation_count());
    if (c.fail_on_run > 0 && n >= c.fail_on_run) return Status::internal("planted failure in " + c.name);
    double cost = c.cost_ms;
    if (clock_.hot()) cost = c.hot_cost_ms > 0 ? c.hot_cost_ms : c.cost_ms * clock_.boost_mhz / clock_.capped_mhz;
    if (c.lucky_every > 0 && n % c.lucky_every == 0) cost = c.lucky_cost_ms;
    if (c.noise > 0) cost *= 1.0 + c.noise * std::uniform_real_distribution<double>(-1.0, 1.0)(rng_);
    if (c.spike_probability > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < c.spike_probability)
      cost *= c.spike_factor;
    if (c.run_factor) cost *= c.run_factor(n);
    cost *= 1.0 + drift_per_s_ * clock_.now / 1000.0;
    clock_.now += cost;
    return Status::ok();
  }
  size_t rotation_count() const override { return 4; }
  Timer& timer() override { return timer_; }
  Status recover() override {
    ++recovers_;
    return Status::ok();
  }

  int runs(size_t i) const { return runs_[i]; }
  int checks(size_t i) const { return checks_[i]; }
  int recovers() const { return recovers_; }
  double started_at(size_t i) const { return started_at_[i]; }  // -1: never looked at
  double now() const { return clock_.now; }
  FakeClock& clock() { return clock_; }
  FakeTimer& fake_timer() { return timer_; }
  const std::set<size_t>& rotations() const { return rotations_; }

 private:
  std::vector<FakeCandidate> cands_;
  FakeClock clock_;
  FakeTimer timer_;
  std::mt19937_64 rng_;
  std::vector<int> runs_, checks_;
  std::vector<double> started_at_;
  std::set<size_t> rotations_;
  int recovers_ = 0;
  double drift_per_s_ = 0;
};

// A policy whose phases are easy to count: one warm-up run, no re-measurement.
inline TuningPolicy counting_policy() {
  TuningPolicy p;
  p.max_warmup_ms = 0;
  p.max_warmup_iters = 1;
  p.max_tuning_ms = 1000;
  p.max_tuning_iters = 10;
  p.remeasure_rounds = 0;
  return p;
}

}  // namespace tunableop::testing
