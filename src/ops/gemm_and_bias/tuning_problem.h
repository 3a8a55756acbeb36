// One GemmAndBias problem as the tuner sees it: rotating copies of A, B and bias on the device
// (C is never read: beta is 0), and the numerics check. On the CPU candidates are compared with
// the fp64 reference (every column when m*n*k is small, else kSampledColumns evenly spread
// columns, plus a scan that every element of C was written); on other devices with Default's
// output element-wise. Freivalds' test (what GEMM uses) does not survive a nonlinear activation.
#pragma once

#include <memory>
#include <vector>

#include "tunableop/gemm_and_bias.h"
#include "tunableop/registry.h"
#include "tunableop/tuner.h"

namespace tunableop {

class GemmAndBiasTuningProblem : public TuningProblem {
 public:
  static constexpr int64_t kFullReferenceMacs = int64_t(1) << 26;
  static constexpr int64_t kSampledColumns = 64;

  // `source` holds the inputs to copy (device pointers of the problem's device). Candidates
  // must start with Default.
  static StatusOr<std::unique_ptr<GemmAndBiasTuningProblem>> create(const GemmAndBiasParams& p,
                                                                    const GemmAndBiasOperands& source,
                                                                    std::vector<GemmAndBiasCandidate> candidates,
                                                                    const DeviceRuntime& rt, const TuningPolicy& policy,
                                                                    Logger& log);
  ~GemmAndBiasTuningProblem() override;

  std::string op_signature() const override { return gemm_and_bias_op_signature(p_); }
  std::string params_signature() const override { return gemm_and_bias_params_signature(p_); }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override { return cands_[i].supports(p_); }
  Status check_numerics(size_t i) override;
  Status run(size_t i, size_t rotation) override;
  size_t rotation_count() const override { return sets_.size(); }
  Timer& timer() override { return *timer_; }
  Status recover() override { return rt_.recover(); }

 private:
  GemmAndBiasTuningProblem(const GemmAndBiasParams& p, std::vector<GemmAndBiasCandidate> c, const DeviceRuntime& rt,
                           void* stream)
      : p_(p), cands_(std::move(c)), rt_(rt), stream_(stream) {}
  StatusOr<void*> alloc(size_t bytes);

  struct Set {
    void *a, *b, *bias, *c;
  };
  GemmAndBiasParams p_;
  std::vector<GemmAndBiasCandidate> cands_;
  const DeviceRuntime& rt_;
  void* stream_;
  std::vector<void*> allocations_;
  std::vector<Set> sets_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<int64_t> cols_;  // CPU: columns compared with the fp64 reference
  std::vector<double> ref_;    // CPU: reference of those columns; else Default's whole C
  std::unique_ptr<Timer> timer_;
};

}  // namespace tunableop
