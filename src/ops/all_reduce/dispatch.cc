// The all-reduce through the op framework: candidates from the registry (Dispatcher's lists and
// lookup by stored name), the decision of the problem's plan slot in rank 0's context
// (Dispatcher::decide_with: results file, tuning on a miss with the all-reduce's own tuning
// problem), and per communicator that decision frozen per message size, so that every rank of a
// collective runs the same candidate (a per-thread plan could revalidate differently on two
// ranks and leave them waiting for each other forever).
#include <fmt/format.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <tuple>

#include "ops/all_reduce/dispatch.h"

#include "ops/all_reduce/definition.h"
#include "ops/all_reduce/process_tuning.h"
#include "ops/all_reduce/tuning_problem.h"
#include "ops/framework/dispatch.h"

namespace tunableop {

using AllReduceDispatch = ops::Dispatcher<AllReduceOp>;

struct Communicator::State {
  // Barrier of the ranks' threads.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  Status aborted;
  // One decision per problem: the candidate every rank runs. A decision of the problem's plan
  // slot (kept as long as the deciding context), frozen here: a later change of the results
  // must not make two ranks run different candidates.
  using Decision = PlanDecision<AllReduceOp>;
  std::shared_mutex decisions_mu;
  std::map<std::tuple<int, int64_t, int, int, int>, const Decision*> decisions;

  static std::tuple<int, int64_t, int, int, int> key(const AllReduceParams& p) {
    return {int(p.dtype), p.count, int(p.op), int(p.epilogue), int(p.round_to)};
  }
  const Decision* find(const AllReduceParams& p) {
    std::shared_lock lock(decisions_mu);
    auto it = decisions.find(key(p));
    return it == decisions.end() ? nullptr : it->second;
  }
  void store(const AllReduceParams& p, const Decision& d) {
    std::unique_lock lock(decisions_mu);
    decisions.emplace(key(p), &d);
  }
};

Communicator::Communicator(std::vector<int> devices, ProcessGroup* group)
    : devices_(std::move(devices)), group_(group), state_(new State) {}
Communicator::~Communicator() = default;

Status Communicator::barrier() {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  if (!s.aborted.is_ok()) return s.aborted;
  const uint64_t gen = s.generation;
  if (++s.arrived == world_size()) {
    s.arrived = 0;
    ++s.generation;
    s.cv.notify_all();
    return Status::ok();
  }
  s.cv.wait(lock, [&] { return s.generation != gen || !s.aborted.is_ok(); });
  return s.generation != gen ? Status::ok() : s.aborted;
}

void Communicator::abort(const Status& why) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  if (s.aborted.is_ok())
    s.aborted = why.is_ok() ? Status::internal("communicator aborted")
                            : Status(why.code(), "another rank failed: " + why.message());
  s.cv.notify_all();
}

// Its operands live on every rank, so of the tools only the candidate list applies.
template std::vector<AllReduceCandidate> OpTools<AllReduceOp>::candidates(Context&, const AllReduceParams&, int);

std::vector<AllReduceCandidate> all_reduce_candidates_for(Context& ctx, const AllReduceParams& p, int search_effort) {
  return AllReduceDispatch::candidates_for(ctx, p, search_effort);
}

StatusOr<AllReduceCandidate> find_all_reduce_candidate(Context& ctx, const AllReduceParams& p,
                                                       const std::string& name) {
  return AllReduceDispatch::find_candidate(ctx, p, name);
}

void Communicator::clear_abort() {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  s.aborted = Status::ok();
  s.arrived = 0;
  ++s.generation;
}

StatusOr<std::unique_ptr<Communicator>> make_communicator(Context& ctx, const std::vector<int>& devices) {
  if (devices.empty() || int(devices.size()) > kMaxRanks)
    return Status::invalid_argument(
        fmt::format("a communicator needs 1 to {} ranks, got {}", kMaxRanks, devices.size()));
  if (const auto* list = ctx.registry().find_list<CommunicatorFactory>())
    for (const auto& f : *list)
      if (f.device == ctx.device().kind) return f.make(devices, ctx.log());
  return Status::unsupported(
      fmt::format("no all-reduce communicator for {} in this build or on this machine", ctx.device().to_string()));
}

StatusOr<std::unique_ptr<Communicator>> make_process_communicator(Context& ctx, ProcessGroup& group) {
  const int W = group.size();
  if (W < 1 || W > kMaxRanks)
    return Status::invalid_argument(fmt::format("a communicator needs 1 to {} ranks, the group has {}", kMaxRanks, W));
  // Every rank on the same kind of device, and a backend that has a process mode for it.
  const int32_t kind = int32_t(ctx.device().kind);
  std::vector<int32_t> kinds(size_t(W), 0);
  TUNABLEOP_RETURN_IF_ERROR(group.all_gather(&kind, kinds.data(), sizeof(kind)));
  for (int r = 0; r < W; ++r)
    if (kinds[size_t(r)] != kind)
      return Status::invalid_argument(fmt::format("process ranks on different kinds of device: rank 0 {}, rank {} {}",
                                                  device_kind_name(DeviceKind(kinds[0])), r,
                                                  device_kind_name(DeviceKind(kinds[size_t(r)]))));
  if (const auto* list = ctx.registry().find_list<CommunicatorFactory>())
    for (const auto& f : *list)
      if (f.device == ctx.device().kind && f.make_process)
        return f.make_process(ctx.device().ordinal, group, ctx.log());
  return Status::unsupported(fmt::format("no multi-process all-reduce for {} in this build", ctx.device().to_string()));
}

namespace {

// `ctx` is checked only where it decides (group mode, rank 0; in process mode every rank's
// context looks its candidates up).
Status check(Context& ctx, const AllReduceParams& p, const AllReduceOperands& o) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  if (!o.comm) return Status::invalid_argument("all-reduce: no communicator");
  if (p.world_size != o.comm->world_size())
    return Status::invalid_argument(
        fmt::format("all-reduce params say {} ranks, the communicator has {}", p.world_size, o.comm->world_size()));
  if (o.comm->group() && o.rank != o.comm->own_rank())
    return Status::invalid_argument(fmt::format(
        "all-reduce for rank {} on the process holding rank {} (each process calls for its own rank; group mode "
        "needs every rank in one process)",
        o.rank, o.comm->own_rank()));
  if ((o.rank <= 0 || o.comm->group()) && o.comm->device_kind() != ctx.device().kind)
    return Status::invalid_argument(fmt::format("all-reduce on a {} communicator through a {} context",
                                                device_kind_name(o.comm->device_kind()), ctx.device().to_string()));
  if (o.rank >= p.world_size || o.rank < -1)
    return Status::invalid_argument(fmt::format("all-reduce rank {} outside [-1, {})", o.rank, p.world_size));
  if (p.count == 0) return Status::ok();
  for (int r = 0; r < p.world_size; ++r) {
    if (o.rank >= 0 && r != o.rank) continue;
    if (!o.input[size_t(r)] || !o.output[size_t(r)])
      return Status::invalid_argument(fmt::format("all-reduce: rank {}'s input or output is null", r));
    if (p.adds_residual() && o.input[size_t(r)] == o.output[size_t(r)])
      return Status::invalid_argument(
          fmt::format("all-reduce into the residual: rank {}'s input (partial sums) is its output (the residual)", r));
  }
  return Status::ok();
}

// One collective of p in group mode on zeroed scratch buffers: does `c` run on this
// communicator (a library it needs may be missing) before every rank commits to it?
Status probe(Communicator& comm, const AllReduceParams& p, const AllReduceCandidate& c) {
  AllReduceOperands o;
  o.comm = &comm;
  std::vector<std::pair<int, void*>> bufs;
  // In place, except into the residual stream (an fp32 buffer of its own).
  std::vector<uint8_t> zeros(std::max<size_t>(std::max(p.bytes(), p.output_bytes()), 16), 0);
  Status st;
  auto zeroed = [&](int r) -> StatusOr<void*> {
    auto m = comm.alloc(r, zeros.size());
    if (!m.is_ok()) return m.status();
    bufs.emplace_back(r, *m);
    TUNABLEOP_RETURN_IF_ERROR(comm.copy_to_device(r, *m, zeros.data(), zeros.size()));
    return *m;
  };
  for (int r = 0; r < p.world_size && st.is_ok(); ++r) {
    auto in = zeroed(r);
    auto out = !in.is_ok() || !p.adds_residual() ? in : zeroed(r);
    if (!out.is_ok()) {
      st = out.status();
      break;
    }
    o.input[size_t(r)] = *in;
    o.output[size_t(r)] = *out;
    o.stream[size_t(r)] = comm.stream(r);
  }
  if (st.is_ok()) st = c.run(p, o);
  for (int r = 0; r < p.world_size; ++r) {
    Status s = comm.synchronize(r, nullptr);
    if (st.is_ok()) st = s;
  }
  for (const auto& [r, b] : bufs) comm.free(r, b);
  return st;
}

// How the decider reaches every rank: in one process directly; in process mode each step is a
// command every rank carries out (process_tuning.h), and finish() tells the others the choice.
struct DecisionSteps {
  std::function<StatusOr<std::unique_ptr<TuningProblem>>(std::vector<AllReduceCandidate>)> problem;
  std::function<Status(const AllReduceCandidate&)> probe;
  std::function<Status()> recover;
  std::function<Status(const std::string& solution, ChoiceSource source, const Status& why)> finish;
};

// Rank 0 (or the group-mode caller) decides for every rank: the plan slot's decision (results
// file, else tuning over this communicator); the chosen candidate must then survive one
// collective, else Default.
void decide(Context& ctx, const AllReduceParams& p, Communicator& comm, const DecisionSteps& steps) {
  auto& slot = AllReduceDispatch::slot_for(ctx, p);
  auto make = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    auto cands = AllReduceDispatch::candidates_for(ctx, p, ctx.options().policy.search_effort);
    if (cands.empty() || cands.front().name != "Default")
      return Status::unsupported(fmt::format("no Default all-reduce on {} in this build", ctx.device().to_string()));
    return steps.problem(std::move(cands));
  };
  const PlanDecision<AllReduceOp>& chosen = AllReduceDispatch::decide_with(ctx, slot, p, make);
  const std::string op = all_reduce_op_signature(p), params = all_reduce_params_signature(p);
  Status last = chosen.error;
  for (const PlanDecision<AllReduceOp>* d :
       {&chosen, &AllReduceDispatch::decision_named(ctx, slot, p, "Default", chosen.source)}) {
    if (!d->candidate) {
      last = d->error;
      continue;
    }
    last = steps.probe(*d->candidate);
    if (last.is_ok()) {
      last = steps.finish(d->solution, d->source, Status::ok());
      if (!last.is_ok()) break;
      ctx.log().log(1, fmt::format("{}({}) on {}: {}", op, params, comm.describe(), d->solution));
      comm.state().store(p, *d);
      return;
    }
    ctx.log().warn(
        fmt::format("{}({}): {} does not run on {}: {}", op, params, d->solution, comm.describe(), last.message()));
    (void)steps.recover();
  }
  const Status none(last.code(), fmt::format("no all-reduce runs on {}: {}", comm.describe(), last.message()));
  (void)steps.finish("", ChoiceSource::kTuningFailed, none);
  comm.state().store(p, AllReduceDispatch::failed(ctx, slot, none));
}

void decide_in_process(Context& ctx, const AllReduceParams& p, Communicator& comm) {
  DecisionSteps steps;
  steps.problem = [&](std::vector<AllReduceCandidate> cands) -> StatusOr<std::unique_ptr<TuningProblem>> {
    auto pr = ops::AllReduceTuningProblem::create(comm, p, std::move(cands));
    if (!pr.is_ok()) return pr.status();
    return std::unique_ptr<TuningProblem>(std::move(*pr));
  };
  steps.probe = [&](const AllReduceCandidate& c) { return probe(comm, p, c); };
  steps.recover = [&] { return comm.recover(); };
  steps.finish = [](const std::string&, ChoiceSource, const Status&) { return Status::ok(); };
  decide(ctx, p, comm, steps);
}

// Process mode: rank 0 decides, each of its measurements carried out by every rank
// (process_tuning.h); the others follow and take the candidate it names.
void decide_across_processes(Context& ctx, const AllReduceParams& p, Communicator& comm) {
  if (comm.own_rank() != 0) {
    auto& slot = AllReduceDispatch::slot_for(ctx, p);
    auto d = ops::follow_process_decision(ctx, comm, p);
    const Status why = d.is_ok() ? d->error : d.status();
    comm.state().store(p, why.is_ok() ? AllReduceDispatch::decision_named(ctx, slot, p, d->solution, d->source)
                                      : AllReduceDispatch::failed(ctx, slot, why));
    return;
  }
  ops::ProcessDecisionDriver driver(ctx, comm, p);
  DecisionSteps steps;
  steps.problem = [&](std::vector<AllReduceCandidate> cands) { return driver.problem(std::move(cands)); };
  steps.probe = [&](const AllReduceCandidate& c) { return driver.probe(c); };
  steps.recover = [&] { return driver.recover(); };
  steps.finish = [&](const std::string& solution, ChoiceSource source, const Status& why) {
    return driver.finish(solution, source, why);
  };
  decide(ctx, p, comm, steps);
}

}  // namespace

Status all_reduce(Context& ctx, const AllReduceParams& params, const AllReduceOperands& ops) {
  // A rank that fails here releases the others from the rendezvous they may be waiting in.
  Status valid = check(ctx, params, ops);
  if (!valid.is_ok()) {
    if (ops.comm && ops.rank >= 0) ops.comm->abort(valid);
    return valid;
  }
  if (params.count == 0) return Status::ok();
  Communicator& comm = *ops.comm;
  Communicator::State& s = comm.state();
  const Communicator::State::Decision* d = s.find(params);
  if (!d && ops.rank < 0) {
    decide_in_process(ctx, params, comm);
    d = s.find(params);
  } else if (!d) {
    // First sight in rank mode: every rank gets here with the same params, in the same order.
    const int r = ops.rank;
    Status st = comm.capturing(r, ops.stream[size_t(r)])
                    ? Status::invalid_argument(fmt::format(
                          "all-reduce of {} elements first met while a CUDA graph is being captured: run one "
                          "step eagerly first, so that the ranks can agree on a candidate",
                          params.count))
                    : comm.synchronize(r, ops.stream[size_t(r)]);
    if (!st.is_ok()) {
      comm.abort(st);
      return st;
    }
    if (comm.group()) {
      decide_across_processes(ctx, params, comm);
    } else {
      TUNABLEOP_RETURN_IF_ERROR(comm.barrier());
      if (r == 0) decide_in_process(ctx, params, comm);
      TUNABLEOP_RETURN_IF_ERROR(comm.barrier());
    }
    d = s.find(params);
  }
  if (!d) return Status::internal("all-reduce: no decision after deciding");
  if (!d->candidate) return d->error;
  return d->candidate->run(params, ops);
}

StatusOr<std::vector<AllReduceCandidateTime>> time_all_reduce_candidates(Context& ctx, Communicator& comm,
                                                                         const AllReduceParams& p, int effort,
                                                                         int iterations, int rounds) {
  if (!comm.group()) return Status::invalid_argument("time_all_reduce_candidates: a process-mode communicator");
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  std::vector<AllReduceCandidateTime> rows;
  if (comm.own_rank() != 0) {
    auto d = ops::follow_process_decision(ctx, comm, p);
    if (!d.is_ok()) return d.status();
    return rows;
  }
  ops::ProcessDecisionDriver driver(ctx, comm, p);
  auto cands = AllReduceDispatch::candidates_for(ctx, p, effort);
  auto pr = driver.problem(cands);
  Status st = pr.status();
  for (size_t i = 0; st.is_ok() && i < cands.size(); ++i) {
    AllReduceCandidateTime row{cands[i].name, (*pr)->supports(i), 0};
    if (row.status.is_ok()) row.status = (*pr)->check_numerics(i);
    size_t rotation = 0;
    if (row.status.is_ok()) row.status = time_runs(**pr, i, 5, &rotation).status();  // warm
    std::vector<double> us;
    for (int k = 0; k < rounds && row.status.is_ok(); ++k) {
      auto ms = time_runs(**pr, i, iterations, &rotation);
      row.status = ms.status();
      if (ms.is_ok()) us.push_back(*ms * 1e3);
    }
    if (row.status.is_ok()) row.us = median(us);
    if (!row.status.is_ok() && !row.status.is_unsupported()) (void)(*pr)->recover();
    rows.push_back(std::move(row));
  }
  TUNABLEOP_RETURN_IF_ERROR(driver.finish("", ChoiceSource::kNotTuned, st));
  if (!st.is_ok()) return st;
  return rows;
}

std::string all_reduce_solution(Communicator& comm, const AllReduceParams& p) {
  const auto* d = comm.state().find(p);
  return d && d->candidate ? d->solution : "";
}

}  // namespace tunableop
