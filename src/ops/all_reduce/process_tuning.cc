#include "ops/all_reduce/process_tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/all_reduce/dispatch.h"
#include "ops/all_reduce/tuning_problem.h"

namespace tunableop::ops {
namespace {

enum class Cmd : int32_t { kCreate = 1, kCheck, kRun, kStart, kStop, kProbe, kRecover, kFinish };

struct Command {
  Cmd cmd = Cmd::kFinish;
  int32_t index = 0;  // a candidate of the problem's list
  int64_t arg = 0;    // kFinish: the ChoiceSource and whether a candidate was chosen
};

Status send(ProcessGroup& g, Command c) { return g.broadcast(&c, sizeof(c), 0); }

// This process's rank of the collective: its buffers on its device, its input, and the
// operands of its rank-mode calls. Made on every rank (rank 0 too) for a tuning problem or a probe.
class RankBuffers {
 public:
  RankBuffers(Communicator& comm, const AllReduceParams& p) : comm_(comm), p_(p), rank_(comm.own_rank()) {}
  ~RankBuffers() {
    (void)comm_.synchronize(rank_, nullptr);
    for (void* m : {in_, out_})
      if (m) comm_.free(rank_, m);
  }
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  // `input`: what the input holds (tuning_input, or zeros for a probe).
  Status make(const std::vector<uint8_t>& input) {
    host_in_ = input;
    auto in = comm_.alloc(rank_, host_in_.size());
    if (!in.is_ok()) return in.status();
    in_ = *in;
    auto out = comm_.alloc(rank_, out_bytes());
    if (!out.is_ok()) return out.status();
    out_ = *out;
    TUNABLEOP_RETURN_IF_ERROR(comm_.copy_to_device(rank_, in_, host_in_.data(), host_in_.size()));
    return set_output(tuning_initial_output(p_));
  }
  size_t out_bytes() const { return std::max<size_t>(p_.output_bytes(), 16); }
  Status set_output(const std::vector<uint8_t>& host) {
    return comm_.copy_to_device(rank_, out_, host.data(), host.size());
  }
  // The input copied into the output (the in-place form starts from it).
  Status output_from_input() { return comm_.copy_to_device(rank_, out_, host_in_.data(), p_.bytes()); }
  AllReduceOperands operands(bool in_place) const {
    return AllReduceOperands::for_rank(comm_, rank_, in_place ? out_ : in_, out_, comm_.stream(rank_));
  }
  Status run(const AllReduceCandidate& c, bool in_place) {
    Status st = c.run(p_, operands(in_place));
    return st.is_ok() ? comm_.synchronize(rank_, nullptr) : st;
  }
  StatusOr<std::vector<uint8_t>> output() {
    std::vector<uint8_t> host(p_.output_bytes());
    TUNABLEOP_RETURN_IF_ERROR(comm_.copy_to_host(rank_, host.data(), out_, host.size()));
    return host;
  }

 private:
  Communicator& comm_;
  AllReduceParams p_;
  int rank_;
  void* in_ = nullptr;
  void* out_ = nullptr;
  std::vector<uint8_t> host_in_;
};

// One numerics phase of candidate c on every rank: the output reset, one run, every rank's
// status agreed, the outputs gathered at rank 0 (into *all: world_size * output_bytes).
Status check_phase(Communicator& comm, const AllReduceParams& p, RankBuffers& b, const AllReduceCandidate& c,
                   bool in_place, std::vector<uint8_t>* all) {
  ProcessGroup& g = *comm.group();
  // Every rank ready before any runs: a rank that could not reset its output must not leave
  // the others inside the collective.
  TUNABLEOP_RETURN_IF_ERROR(agree(g, in_place ? b.output_from_input() : b.set_output(tuning_initial_output(p))));
  Status st = b.run(c, in_place);
  StatusOr<std::vector<uint8_t>> mine = st.is_ok() ? b.output() : StatusOr<std::vector<uint8_t>>(st);
  TUNABLEOP_RETURN_IF_ERROR(agree(g, mine.status()));
  if (g.rank() == 0) all->assign(size_t(g.size()) * p.output_bytes(), 0);
  return g.gather(mine->data(), g.rank() == 0 ? all->data() : nullptr, p.output_bytes(), 0);
}

// Both phases (out of place, then in place unless into the residual) on every rank; rank 0
// checks every rank's output and returns the verdict, the others the agreed run status.
Status check_candidate(Communicator& comm, const AllReduceParams& p, RankBuffers& b, const AllReduceCandidate& c,
                       const std::vector<double>& ref) {
  const int W = comm.world_size();
  const size_t bytes = p.output_bytes();
  Status verdict;
  for (const bool in_place : {false, true}) {
    if (in_place && p.adds_residual()) break;  // no in-place form: the output is another buffer
    std::vector<uint8_t> all;
    TUNABLEOP_RETURN_IF_ERROR(check_phase(comm, p, b, c, in_place, &all));
    const char* how = in_place ? "in place" : p.adds_residual() ? "into the residual" : "out of place";
    for (int r = 0; r < W && comm.own_rank() == 0 && verdict.is_ok(); ++r)
      verdict = check_rank_output(p, c.name, how, r, all.data() + size_t(r) * bytes, r > 0 ? all.data() : nullptr, ref);
  }
  return verdict;
}

// One collective of `c` (or the reason this rank has none) on zeroed buffers: agreed before the
// run (every rank has the candidate and its buffers) and after.
Status probe_on_rank(Communicator& comm, const AllReduceParams& p, const StatusOr<AllReduceCandidate>& c) {
  RankBuffers b(comm, p);
  Status st = c.status();
  if (st.is_ok()) st = b.make(std::vector<uint8_t>(std::max<size_t>(p.bytes(), 16), 0));
  if (st.is_ok()) st = b.set_output(std::vector<uint8_t>(b.out_bytes(), 0));
  TUNABLEOP_RETURN_IF_ERROR(agree(*comm.group(), st));
  return agree(*comm.group(), b.run(*c, /*in_place=*/!p.adds_residual()));
}

// The timer of the process tuning problem: a region on every rank's device; the slowest rank's
// time at rank 0. A rank whose runs failed in the region reports +inf.
class ProcessTimer final : public Timer {
 public:
  ProcessTimer(Communicator& comm, Status* run_error) : comm_(comm), local_(comm.make_timer()), run_error_(run_error) {}
  void start() override {
    if (!send(*comm_.group(), {Cmd::kStart}).is_ok()) broken_ = true;
    *run_error_ = Status::ok();
    local_->start();
  }
  double stop_ms() override {
    if (!send(*comm_.group(), {Cmd::kStop}).is_ok()) broken_ = true;
    return slowest(comm_, *local_, *run_error_) + (broken_ ? std::numeric_limits<double>::infinity() : 0.0);
  }
  double now_ms() override { return local_->now_ms(); }
  double min_sample_ms() const override { return local_->min_sample_ms(); }
  DeviceClock device_clock() override { return local_->device_clock(); }  // rank 0's device
  bool slows_under_load() const override { return local_->slows_under_load(); }

  // This rank's region ended, every rank's time gathered at rank 0: the largest (followers: theirs).
  static double slowest(Communicator& comm, Timer& local, const Status& run_error) {
    double ms = local.stop_ms();
    if (!run_error.is_ok() || !std::isfinite(ms)) ms = std::numeric_limits<double>::infinity();
    ProcessGroup& g = *comm.group();
    std::vector<double> all(size_t(g.size()), 0.0);
    if (!g.gather(&ms, all.data(), sizeof(ms), 0).is_ok()) return std::numeric_limits<double>::infinity();
    return g.rank() == 0 ? *std::max_element(all.begin(), all.end()) : ms;
  }

 private:
  Communicator& comm_;
  std::unique_ptr<Timer> local_;
  Status* run_error_;
  bool broken_ = false;
};

// Rank 0's tuning problem: each call a command that every rank carries out.
class ProcessTuningProblem final : public TuningProblem {
 public:
  ProcessTuningProblem(Communicator& comm, const AllReduceParams& p, std::vector<AllReduceCandidate> c)
      : comm_(comm), p_(p), cands_(std::move(c)), buffers_(comm, p), timer_(comm, &run_error_) {}

  Status init() {
    std::vector<std::vector<uint8_t>> inputs;
    for (int r = 0; r < p_.world_size; ++r) inputs.push_back(tuning_input(p_, r));
    ref_ = tuning_reference(p_, inputs);
    return agree(*comm_.group(), buffers_.make(inputs[0]));
  }
  std::string op_signature() const override { return all_reduce_op_signature(p_); }
  std::string params_signature() const override { return all_reduce_params_signature(p_); }
  size_t candidate_count() const override { return cands_.size(); }
  std::string candidate_name(size_t i) const override { return cands_[i].name; }
  Status supports(size_t i) override { return cands_[i].supports(p_); }
  Status check_numerics(size_t i) override {
    TUNABLEOP_RETURN_IF_ERROR(send(*comm_.group(), {Cmd::kCheck, int32_t(i)}));
    return check_candidate(comm_, p_, buffers_, cands_[i], ref_);
  }
  Status run(size_t i, size_t) override {
    TUNABLEOP_RETURN_IF_ERROR(send(*comm_.group(), {Cmd::kRun, int32_t(i)}));
    Status st = cands_[i].run(p_, buffers_.operands(false));
    if (!st.is_ok() && run_error_.is_ok()) run_error_ = st;
    return st;
  }
  size_t rotation_count() const override { return 1; }
  Timer& timer() override { return timer_; }
  Status recover() override {
    TUNABLEOP_RETURN_IF_ERROR(send(*comm_.group(), {Cmd::kRecover}));
    return agree(*comm_.group(), comm_.recover());
  }

 private:
  Communicator& comm_;
  AllReduceParams p_;
  std::vector<AllReduceCandidate> cands_;
  RankBuffers buffers_;
  std::vector<double> ref_;
  Status run_error_;
  ProcessTimer timer_;
};

}  // namespace

ProcessDecisionDriver::ProcessDecisionDriver(Context& ctx, Communicator& comm, const AllReduceParams& p)
    : ctx_(ctx), comm_(comm), p_(p) {}

StatusOr<std::unique_ptr<TuningProblem>> ProcessDecisionDriver::problem(std::vector<AllReduceCandidate> candidates) {
  ProcessGroup& g = *comm_.group();
  TUNABLEOP_RETURN_IF_ERROR(send(g, {Cmd::kCreate}));
  // The followers find each candidate by its name (the same binary lists the same ones).
  std::string names;
  for (const auto& c : candidates) names += c.name + "\n";
  auto sent = broadcast_string(g, names, 0);
  if (!sent.is_ok()) return sent.status();
  auto pr = std::make_unique<ProcessTuningProblem>(comm_, p_, std::move(candidates));
  TUNABLEOP_RETURN_IF_ERROR(pr->init());
  return std::unique_ptr<TuningProblem>(std::move(pr));
}

Status ProcessDecisionDriver::probe(const AllReduceCandidate& c) {
  ProcessGroup& g = *comm_.group();
  TUNABLEOP_RETURN_IF_ERROR(send(g, {Cmd::kProbe}));
  auto sent = broadcast_string(g, c.name, 0);
  if (!sent.is_ok()) return sent.status();
  return probe_on_rank(comm_, p_, c);
}

Status ProcessDecisionDriver::recover() {
  TUNABLEOP_RETURN_IF_ERROR(send(*comm_.group(), {Cmd::kRecover}));
  return agree(*comm_.group(), comm_.recover());
}

Status ProcessDecisionDriver::finish(const std::string& solution, ChoiceSource source, const Status& why) {
  ProcessGroup& g = *comm_.group();
  TUNABLEOP_RETURN_IF_ERROR(send(g, {Cmd::kFinish, int32_t(why.code()), int64_t(source)}));
  auto sent = broadcast_string(g, why.is_ok() ? solution : why.message(), 0);
  return sent.status();
}

StatusOr<ProcessDecision> follow_process_decision(Context& ctx, Communicator& comm, const AllReduceParams& p) {
  ProcessGroup& g = *comm.group();
  std::vector<AllReduceCandidate> cands;
  std::unique_ptr<RankBuffers> buffers;
  std::unique_ptr<Timer> timer;
  Status run_error;
  for (;;) {
    Command c;
    TUNABLEOP_RETURN_IF_ERROR(g.broadcast(&c, sizeof(c), 0));
    const bool indexed = c.cmd == Cmd::kCheck || c.cmd == Cmd::kRun;
    if (indexed && (c.index < 0 || size_t(c.index) >= cands.size() || !buffers))
      return Status::internal(fmt::format("all-reduce tuning: rank 0 named candidate {} of {}", c.index, cands.size()));
    switch (c.cmd) {
      case Cmd::kCreate: {
        auto names = broadcast_string(g, "", 0);
        if (!names.is_ok()) return names.status();
        cands.clear();
        Status st;
        for (size_t at = 0, nl; (nl = names->find('\n', at)) != std::string::npos; at = nl + 1) {
          auto found = find_all_reduce_candidate(ctx, p, names->substr(at, nl - at));
          if (!found.is_ok()) {
            st = found.status();
            break;
          }
          cands.push_back(std::move(*found));
        }
        buffers = std::make_unique<RankBuffers>(comm, p);
        timer = comm.make_timer();
        if (st.is_ok()) st = buffers->make(tuning_input(p, g.rank()));
        // On a failure anywhere rank 0 gives up tuning and goes on to probe Default.
        if (!agree(g, st).is_ok()) buffers.reset();
        break;
      }
      case Cmd::kCheck: (void)check_candidate(comm, p, *buffers, cands[size_t(c.index)], {}); break;
      case Cmd::kRun: {
        Status st = cands[size_t(c.index)].run(p, buffers->operands(false));
        if (!st.is_ok() && run_error.is_ok()) run_error = st;
        break;
      }
      case Cmd::kStart:
        if (!timer) return Status::internal("all-reduce tuning: a timed region before the problem");
        run_error = Status::ok();
        timer->start();
        break;
      case Cmd::kStop:
        if (!timer) return Status::internal("all-reduce tuning: a timed region before the problem");
        (void)ProcessTimer::slowest(comm, *timer, run_error);
        break;
      case Cmd::kRecover: (void)agree(g, comm.recover()); break;
      case Cmd::kProbe: {
        auto name = broadcast_string(g, "", 0);
        if (!name.is_ok()) return name.status();
        (void)probe_on_rank(comm, p, find_all_reduce_candidate(ctx, p, *name));
        break;
      }
      case Cmd::kFinish: {
        auto text = broadcast_string(g, "", 0);
        if (!text.is_ok()) return text.status();
        ProcessDecision d;
        d.source = ChoiceSource(c.arg);
        if (c.index == 0)
          d.solution = *text;
        else
          d.error = Status(StatusCode(c.index), *text);
        return d;
      }
      default: return Status::internal(fmt::format("all-reduce tuning: unknown command {}", int(c.cmd)));
    }
  }
}

}  // namespace tunableop::ops
