// One GEMM problem as the tuner sees it: candidates, rotating input copies on the device,
// the numerics reference (fp64 on CPU via Freivalds; Default's output on other devices).
#pragma once

#include <memory>
#include <vector>

#include "tunableop/gemm.h"
#include "tunableop/registry.h"
#include "tunableop/tuner.h"

namespace tunableop {

class GemmTuningProblem : public TuningProblem {
 public:
  // `source` holds the inputs to copy (device pointers of the problem's device; c is read only
  // when beta != 0). Candidates must start with Default. Fails if memory cannot be had.
  static StatusOr<std::unique_ptr<GemmTuningProblem>> create(const GemmParams& p, const GemmOperands& source,
                                                             std::vector<GemmCandidate> candidates,
                                                             const DeviceRuntime& rt, const TuningPolicy& policy,
                                                             Logger& log);
  ~GemmTuningProblem() override;

  std::string op_signature() const override { return gemm_op_signature(p_); }
  std::string params_signature() const override { return gemm_params_signature(p_); }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override { return cands_[i].supports(p_); }
  Status check_numerics(size_t i) override;
  Status run(size_t i, size_t rotation) override;
  size_t rotation_count() const override { return sets_.size(); }
  Timer& timer() override { return *timer_; }
  Status recover() override { return rt_.recover(); }
  size_t bytes_allocated() const { return bytes_; }

 private:
  GemmTuningProblem(const GemmParams& p, std::vector<GemmCandidate> c, const DeviceRuntime& rt, void* stream)
      : p_(p), cands_(std::move(c)), rt_(rt), stream_(stream) {}
  StatusOr<void*> alloc(size_t bytes);
  Status fetch_c(std::vector<uint8_t>& host);  // set 0's C to host
  Status restore_c0();                         // set 0's C back to pristine (or NaN poison)

  struct Set {
    void *a, *b, *c;
  };
  GemmParams p_;
  std::vector<GemmCandidate> cands_;
  const DeviceRuntime& rt_;
  void* stream_;
  std::vector<void*> allocations_;
  size_t bytes_ = 0;
  std::vector<Set> sets_;
  void* c_pristine_ = nullptr;  // device copy of the caller's C (beta != 0)
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<uint8_t> host_a_, host_b_, host_c0_;  // host copies for the fp64 check
  std::vector<double> ref_;                         // Default's output (non-CPU devices)
  void* ref_device_ = nullptr;                      // Default's output kept on the device (device compare)
  std::unique_ptr<Timer> timer_;
};

}  // namespace tunableop
