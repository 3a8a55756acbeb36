// The tuning problem every op shares: rotating copies of the op's buffers on the device (sized
// so that a rotation streams more than the last-level cache / L2), one workspace for the
// candidates that ask for it, outputs poisoned with NaN before each numerics check (input-output
// buffers restored instead), and the comparison with the reference: the op's fp64 check on the
// CPU, Default's output on other devices (compared on the device when the runtime can).
// BufferedTuningProblem does all of that from a buffer description; OpTuningProblem<Op> binds
// it to an op's candidates through OpDefinition<Op>.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "tunableop/op.h"
#include "tunableop/registry.h"
#include "tunableop/tuner.h"

namespace tunableop::ops {

class BufferedTuningProblem : public TuningProblem {
 public:
  static constexpr size_t kMaxSets = 64;
  static constexpr size_t kMaxRotatingBytes = size_t(2) << 30;  // never more than 2 GiB of copies

  ~BufferedTuningProblem() override;
  BufferedTuningProblem(const BufferedTuningProblem&) = delete;
  BufferedTuningProblem& operator=(const BufferedTuningProblem&) = delete;

  Status check_numerics(size_t i) override;
  size_t rotation_count() const override { return sets_.size(); }
  Timer& timer() override { return *timer_; }
  Status recover() override { return rt_.recover(); }
  size_t bytes_allocated() const { return bytes_; }

 protected:
  struct Description {
    std::vector<BufferSpec> buffers;
    OutputLayout output;
    double tolerance = 0;
    size_t workspace_bytes = 0;
    // Makes the CPU check from the pristine buffers in host memory (see HostCheck); they stay
    // valid as long as the problem (the caller's buffers, or copies of them).
    std::function<HostCheck(const std::vector<const void*>& host_buffers)> host_check;
    // The buffers hold numbers only (no page tables or lengths): NaN/Inf in an input may be
    // replaced by random numbers for tuning.
    bool numbers_only = true;
  };
  BufferedTuningProblem(const DeviceRuntime& rt, void* stream) : rt_(rt), stream_(stream) {}
  // Allocates and fills the rotating sets from `sources` (the caller's buffers, in
  // Description::buffers order; they must stay valid and unchanged while the problem lives: the
  // CPU's numerics check reads them), the workspace, and what the numerics check needs, as many
  // sets as the device's free memory allows (ResourceExhausted when not even one fits).
  Status setup(Description d, const std::vector<const void*>& sources, const TuningPolicy& policy, Logger& log);
  const std::vector<void*>& set(size_t rotation) const { return sets_[rotation % sets_.size()]; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return d_.workspace_bytes; }
  void* stream() const { return stream_; }
  // One run of candidate i on rotating set `set` (the op binds the buffers to its operands).
  virtual Status run_on_set(size_t i, size_t set) = 0;

 private:
  StatusOr<void*> alloc(size_t bytes);
  Status restore_outputs();  // set 0: outputs poisoned, input-outputs back to pristine

  const DeviceRuntime& rt_;
  void* stream_;
  Description d_;
  std::vector<void*> allocations_;
  size_t bytes_ = 0;
  std::vector<std::vector<void*>> sets_;
  std::vector<void*> pristine_;  // per buffer: device copy of an input-output buffer, else null
  void* workspace_ = nullptr;
  std::vector<std::vector<uint8_t>> host_;  // CPU numerics: host copies of the pristine buffers
  HostCheck host_check_;
  std::vector<double> ref_;     // Default's output as doubles (other devices, host compare)
  void* ref_device_ = nullptr;  // Default's output kept on the device (device compare)
  std::unique_ptr<Timer> timer_;
};

// The tuning problem of one op: candidates (Default first) on rotating copies of the caller's
// operands.
template <class Op>
class OpTuningProblem : public BufferedTuningProblem {
 public:
  using Def = OpDefinition<Op>;
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;

  // `source` holds the inputs to copy (device pointers of the problem's device). Candidates
  // must start with Default. Fails if memory cannot be had.
  // The caller's buffers in the order of Def::buffers(p). An op whose operands may carry pointers
  // its params do not use (FusedLinear: one operands struct for every input and output form)
  // defines sources(p, o), so the params, not which pointers are set, decide the list.
  static std::vector<const void*> sources(const Params& p, const Operands& o) {
    if constexpr (requires { Def::sources(p, o); }) {
      return Def::sources(p, o);
    } else {
      return Def::sources(o);
    }
  }

  static StatusOr<std::unique_ptr<OpTuningProblem>> create(const Params& p, const Operands& source,
                                                           std::vector<Candidate<Op>> candidates,
                                                           const DeviceRuntime& rt, const TuningPolicy& policy,
                                                           Logger& log) {
    if (candidates.empty() || candidates.front().name != "Default")
      return Status::internal(std::string(Def::kName) + " candidates must start with Default");
    std::unique_ptr<OpTuningProblem> pr(new OpTuningProblem(p, std::move(candidates), rt, Def::stream(source)));
    Description d;
    d.buffers = Def::buffers(p);
    d.output = Def::output(p);
    d.tolerance = Def::tolerance(p);
    for (const auto& c : pr->cands_)
      if (c.workspace_bytes) d.workspace_bytes = std::max(d.workspace_bytes, c.workspace_bytes(p));
    d.host_check = [p](const std::vector<const void*>& host) { return Def::host_check(p, host); };
    if constexpr (requires(std::mt19937_64 & rng) { Def::fill_random(p, size_t{0}, nullptr, rng); })
      d.numbers_only = false;  // page tables and lengths: never replaced by random numbers
    TUNABLEOP_RETURN_IF_ERROR(pr->setup(std::move(d), sources(p, source), policy, log));
    for (size_t s = 0; s < pr->rotation_count(); ++s)
      pr->bound_.push_back(
          Def::bind(p, BoundBuffers{pr->set(s), pr->stream(), pr->workspace(), pr->workspace_bytes()}));
    return pr;
  }

  std::string op_signature() const override { return Def::op_signature(p_); }
  std::string params_signature() const override { return Def::params_signature(p_); }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override { return cands_[i].supports(p_); }
  Status run(size_t i, size_t rotation) override { return run_on_set(i, rotation % rotation_count()); }

 private:
  OpTuningProblem(const Params& p, std::vector<Candidate<Op>> c, const DeviceRuntime& rt, void* stream)
      : BufferedTuningProblem(rt, stream), p_(p), cands_(std::move(c)) {}
  Status run_on_set(size_t i, size_t set) override { return cands_[i].run(p_, bound_[set]); }

  Params p_;
  std::vector<Candidate<Op>> cands_;
  std::vector<Operands> bound_;  // the operands of each rotating set
};

}  // namespace tunableop::ops
