// Dispatch for every op, written once: candidate lists and lookup by stored name, the plan
// slots (one per problem, found by a hashed key without locks), revalidation when the context's
// generation moves (lookup, resolve, maybe tune), the fallback to Default when a chosen
// candidate fails at run time, offline tuning on random operands. An op's dispatch.cc only
// instantiates it (see src/ops/gemm_and_bias/dispatch.cc).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "ops/framework/definition.h"
#include "ops/framework/elements.h"
#include "ops/framework/problem_key.h"
#include "ops/framework/slot_table.h"
#include "ops/framework/tuning_problem.h"
#include "tunableop/checked_size.h"
#include "tunableop/context.h"
#include "tunableop/op.h"
#include "tunableop/op_tools.h"
#include "tunableop/status_boundary.h"

namespace tunableop {
namespace detail {

// One problem of one op in one context: what every plan of it (and the plain call) runs.
template <class Op>
struct PlanSlot {
  PlanSlot(const ops::ProblemKey& k, uint64_t h) : key(k), hash(h) {}
  const ops::ProblemKey key;
  const uint64_t hash;
  std::atomic<uint64_t> generation{0};  // the context generation `decision` was made for (0: none yet)
  std::atomic<const PlanDecision<Op>*> decision{nullptr};
  // Written once, before the first decision is published.
  std::string op_signature, params_signature;
  // Slow path only, under mu.
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Candidate<Op>>> resolved;  // by name; null: does not apply
  std::vector<std::unique_ptr<const PlanDecision<Op>>> decisions;        // every one ever made
};

}  // namespace detail

namespace ops {

template <class Op>
class Dispatcher {
 public:
  using Def = OpDefinition<Op>;
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;
  using Cand = Candidate<Op>;
  using Family = CandidateFamily<Op>;
  using Slot = detail::PlanSlot<Op>;
  using Decision = PlanDecision<Op>;

  // How a miss is tuned when a plan decides: on copies of the call's operands (`ops`), or on
  // random operands made then (null), on `stream`, with the caller's hooks (may be null).
  struct TuneOn {
    const Operands* ops = nullptr;
    void* stream = nullptr;
    const PlanHooks<Op>* hooks = nullptr;
  };
  using MakeProblem = std::function<StatusOr<std::unique_ptr<TuningProblem>>()>;

  // The candidates for p on the context's device at the given effort: Default first, then the
  // static ones in registration order, then family expansions.
  static std::vector<Cand> candidates_for(Context& ctx, const Params& p, int effort) {
    std::vector<Cand> out;
    const DeviceKind kind = ctx.device().kind;
    if (const auto* list = ctx.registry().find_list<Cand>()) {
      for (const auto& c : *list) {
        if (c.device != kind || c.min_effort > effort) continue;
        if (c.name == "Default")
          out.insert(out.begin(), c);
        else
          out.push_back(c);
      }
    }
    if (const auto* fams = ctx.registry().find_list<Family>()) {
      for (const auto& f : *fams) {
        if (f.device != kind || f.min_effort > effort) continue;
        for (auto& c : f.expand(p, effort)) out.push_back(std::move(c));
      }
    }
    return out;
  }

  // A candidate by its stored name: a static one, or one a family rebuilds; NotFound if none.
  static StatusOr<Cand> find_candidate(Context& ctx, const Params& p, const std::string& name) {
    const DeviceKind kind = ctx.device().kind;
    if (const auto* list = ctx.registry().find_list<Cand>())
      for (const auto& c : *list)
        if (c.device == kind && c.name == name) return c;
    if (const auto* fams = ctx.registry().find_list<Family>())
      for (const auto& f : *fams)
        if (f.device == kind && name.rfind(f.prefix, 0) == 0) return f.resolve(p, name);
    return Status::not_found(fmt::format("no candidate named '{}' on {}", name, ctx.device().to_string()));
  }

  // "GemmTunableOp_float_NN(nn_4_4_4)" for messages about a problem that threw.
  static std::string describe(const Params& p) { return Def::op_signature(p) + "(" + Def::params_signature(p) + ")"; }

  // The plain call (gemm(ctx, p, ops)): normalize, validate, one lock-free lookup, run. Behind
  // the status boundary (as make_plan and tune): nothing thrown inside crosses the public API.
  static Status call(Context& ctx, const Params& params, const Operands& ops) {
    return status_boundary([&] { return describe(params); }, [&] { return call_unguarded(ctx, params, ops); });
  }
  static Status call_unguarded(Context& ctx, const Params& params, const Operands& ops) {
    const Params p = Def::normalize(params);
    TUNABLEOP_RETURN_IF_ERROR(Def::validate(p));
    if (Def::is_empty(p)) return Status::ok();
    TUNABLEOP_RETURN_IF_ERROR(Def::check_operands(p, ops));
    return run(ctx, slot_for(ctx, p), p, ops);
  }

  static StatusOr<Plan<Op>> make_plan(Context& ctx, const Params& params) {
    return status_boundary([&] { return describe(params); },
                           [&]() -> StatusOr<Plan<Op>> { return make_plan_unguarded(ctx, params); });
  }
  static StatusOr<Plan<Op>> make_plan_unguarded(Context& ctx, const Params& params) {
    const Params p = Def::normalize(params);
    TUNABLEOP_RETURN_IF_ERROR(Def::validate(p));
    if (Def::is_empty(p)) return Plan<Op>(ctx, nullptr, p);
    if (!Def::key(p).valid()) return Status::internal(std::string(Def::kName) + ": problem key too long");
    return Plan<Op>(ctx, &slot_for(ctx, p), p);
  }

  // The hot path, for valid params and operands: a generation check and the chosen candidate.
  static Status run(Context& ctx, Slot& slot, const Params& p, const Operands& ops) {
    if (!current(ctx, slot)) revalidate(ctx, slot, p, TuneOn{&ops, Def::stream(ops), nullptr});
    const Decision* d = slot.decision.load(std::memory_order_acquire);
    if (!d->candidate) return d->error;
    Status st = d->candidate->run(p, ops);
    if (st.is_ok() || !d->fallback) return st;
    return fall_back(ctx, slot, *d, p, ops, st);
  }

  // Whether the slot's decision was made for the context as it is now (two atomic loads).
  static bool current(Context& ctx, const Slot& slot) {
    return slot.generation.load(std::memory_order_acquire) == ctx.generation();
  }

  // The slot's decision, made first when it is not current (Plan::decide / prepare, the
  // interposer). Never null.
  static const Decision& decide(Context& ctx, Slot& slot, const Params& p, const TuneOn& how) {
    if (!current(ctx, slot)) revalidate(ctx, slot, p, how);
    return *slot.decision.load(std::memory_order_acquire);
  }

  // For a caller with a tuning problem of its own (the all-reduce, whose operands live on every
  // rank): the slot's decision, made first when not current with `make` for a miss.
  static const Decision& decide_with(Context& ctx, Slot& slot, const Params& p, const MakeProblem& make) {
    if (!current(ctx, slot)) {
      std::lock_guard<std::mutex> lock(slot.mu);
      decide_locked(ctx, slot, p, make, /*may_tune=*/true);
    }
    return *slot.decision.load(std::memory_order_acquire);
  }

  // A decision for the candidate `name` in the slot (kept with it, not made current): what a
  // caller falls back to when the current one cannot serve it (the all-reduce's Default when
  // the chosen candidate does not run on a communicator).
  static const Decision& decision_named(Context& ctx, Slot& slot, const Params& p, const std::string& name,
                                        ChoiceSource source) {
    std::lock_guard<std::mutex> lock(slot.mu);
    signatures(slot, p);
    return keep(ctx, slot, p, name, source);
  }

  // A decision that runs nothing and answers `why` (kept with the slot, not made current).
  static const Decision& failed(Context& ctx, Slot& slot, Status why) {
    std::lock_guard<std::mutex> lock(slot.mu);
    auto d = std::make_unique<Decision>();
    d->source = ChoiceSource::kTuningFailed;
    d->error = std::move(why);
    slot.decisions.push_back(std::move(d));
    return *slot.decisions.back();
  }

  // Problems met while a CUDA graph was being captured, tuned on random operands now (no
  // capture may be running on the device): what the first decision outside a capture does,
  // and what a caller does that serves calls without deciding (the interposer).
  static bool has_deferred(Context& ctx) { return ctx.op_state<State>().has_deferred.load(std::memory_order_relaxed); }
  static void tune_deferred(Context& ctx) {
    State& st = ctx.op_state<State>();
    std::vector<Params> todo;
    {
      std::lock_guard<std::mutex> lock(st.deferred_mu);
      todo.swap(st.deferred);
      st.has_deferred.store(false, std::memory_order_relaxed);
    }
    for (const Params& p : todo) {
      if (ctx.results().contains(Def::op_signature(p), Def::params_signature(p))) continue;
      auto r = tune(ctx, p, /*retune=*/false, nullptr);
      if (!r.is_ok())
        ctx.log().warn(
            fmt::format("tuning {} first met in a CUDA graph failed: {}", describe(p), r.status().to_string()));
    }
  }

  // Tunes p now on the given operands' data (copied), regardless of kEnabled/kTuning.
  static StatusOr<std::unique_ptr<TuningProblem>> make_problem(Context& ctx, const Params& p, const Operands& source) {
    return OpTools<Op>::tuning_problem(ctx, p, source, candidates_for(ctx, p, ctx.options().policy.search_effort));
  }

  // Offline tuning (`tunableop tune`, benches): random operands, stored like any result.
  static StatusOr<TuningReport> tune(Context& ctx, const Params& params, bool retune, void* stream) {
    return status_boundary([&] { return "tuning " + describe(params); },
                           [&] { return tune_unguarded(ctx, params, retune, stream); });
  }
  static StatusOr<TuningReport> tune_unguarded(Context& ctx, const Params& params, bool retune, void* stream) {
    auto bufs = RandomOperands<Op>::make(ctx, params, 1, stream);
    if (!bufs.is_ok()) return bufs.status();
    auto pr = make_problem(ctx, (*bufs)->params(), (*bufs)->operands());
    if (!pr.is_ok()) return pr.status();
    return ctx.tune(**pr, retune);
  }

  static Slot& slot_for(Context& ctx, const Params& p) {
    const ProblemKey key = Def::key(p);
    return ctx.op_state<State>().table.find_or_insert(
        key, key.hash(), [](const ProblemKey& k, uint64_t h) { return std::make_unique<Slot>(k, h); });
  }

 private:
  struct State {
    SlotTable<Slot> table;
    std::mutex deferred_mu;
    std::vector<Params> deferred;  // problems met while capturing, to tune later
    std::atomic<bool> has_deferred{false};
  };

  // Resolved candidates per name, kept in the slot, so that a revalidation costs a map lookup
  // and not a family resolve (e.g. cuBLASLt re-validation). Under slot.mu.
  static const Cand* resolved(Context& ctx, Slot& slot, const Params& p, const std::string& name) {
    auto it = slot.resolved.find(name);
    if (it == slot.resolved.end()) {
      auto c = find_candidate(ctx, p, name);
      std::shared_ptr<const Cand> sp;
      if (c.is_ok() && c->supports(p).is_ok()) sp = std::make_shared<const Cand>(std::move(*c));
      it = slot.resolved.emplace(name, std::move(sp)).first;
    }
    return it->second.get();
  }

  static void signatures(Slot& slot, const Params& p) {
    if (slot.op_signature.empty()) {
      slot.op_signature = Def::op_signature(p);
      slot.params_signature = Def::params_signature(p);
    }
  }

  // The decision object for (name, source) in the slot: an existing one, or a new one kept for
  // the context's life. A name that does not resolve becomes Default. Under slot.mu.
  static const Decision& keep(Context& ctx, Slot& slot, const Params& p, std::string name, ChoiceSource source) {
    const Cand* def = resolved(ctx, slot, p, "Default");
    const Cand* cand = resolved(ctx, slot, p, name);
    if (!cand) {
      cand = def;
      name = "Default";
    }
    const Cand* fallback = cand == def ? nullptr : def;
    for (const auto& d : slot.decisions)
      if (d->candidate == cand && d->fallback == fallback && d->source == source) return *d;
    auto d = std::make_unique<Decision>();
    d->candidate = cand;
    d->fallback = fallback;
    d->solution = cand ? name : "";
    d->source = source;
    d->workspace_bytes = cand && cand->workspace_bytes ? cand->workspace_bytes(p) : 0;
    if (!cand)
      d->error = Status::unsupported(fmt::format("no Default {} supports {}({}) on {}", Def::kName, slot.op_signature,
                                                 slot.params_signature, ctx.device().to_string()));
    slot.decisions.push_back(std::move(d));
    return *slot.decisions.back();
  }

  // Context::decide for the slot, the answer published. A decision deferred by a capture is
  // published but not marked current, so the first decision outside the capture makes it again
  // (and tunes, on that call's operands). Under slot.mu.
  static void decide_locked(Context& ctx, Slot& slot, const Params& p, const MakeProblem& make, bool may_tune) {
    const uint64_t g = ctx.generation();  // decide for this state; a later change decides again
    if (slot.generation.load(std::memory_order_relaxed) == g) return;  // another thread just did
    signatures(slot, p);
    auto is_valid = [&](const std::string& name) { return resolved(ctx, slot, p, name) != nullptr; };
    const Choice choice = ctx.decide(slot.op_signature, slot.params_signature, is_valid, make, may_tune);
    const Decision& d = keep(ctx, slot, p, choice.solution, choice.source);
    const Decision* before = slot.decision.load(std::memory_order_relaxed);
    if (before != &d) {
      ctx.log().log(2, fmt::format("{}({}) -> {} ({})", slot.op_signature, slot.params_signature, d.solution,
                                   choice_source_name(d.source)));
      slot.decision.store(&d, std::memory_order_release);
    }
    if (choice.source == ChoiceSource::kDeferred) {
      if (before != &d) {  // once per capture that meets it, not once per call
        State& st = ctx.op_state<State>();
        std::lock_guard<std::mutex> lock(st.deferred_mu);
        st.deferred.push_back(p);
        st.has_deferred.store(true, std::memory_order_relaxed);
      }
      return;
    }
    slot.generation.store(g, std::memory_order_release);
  }

  // The context's settings or results changed since the slot decided (or it never did): decide
  // again (which may tune a miss on copies of the call's operands, or on random operands).
  // While the stream captures a CUDA graph nothing is tuned (capture policy, tunableop/op.h);
  // outside one, problems deferred by a capture are tuned first.
  [[gnu::noinline]] static void revalidate(Context& ctx, Slot& slot, const Params& p, const TuneOn& how) {
    const DeviceRuntime* rt = ctx.runtime();
    const bool capturing = rt && rt->capturing && rt->capturing(how.stream);
    if (!capturing && has_deferred(ctx)) tune_deferred(ctx);
    std::unique_ptr<RandomOperands<Op>> random;  // lives until the tuning is done
    MakeProblem make = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
      const Operands* source = how.ops;
      if (!source) {
        auto r = RandomOperands<Op>::make(ctx, p, 1, how.stream);
        if (!r.is_ok()) return r.status();
        random = std::move(*r);
        source = &random->operands();
      }
      auto cands = candidates_for(ctx, p, ctx.options().policy.search_effort);
      if (how.hooks && how.hooks->default_run && !cands.empty() && cands.front().name == "Default") {
        Cand& def = cands.front();
        def.run = [stand_in = how.hooks->default_run, ours = def.run](const Params& q, const Operands& o) {
          Status st = stand_in(q, o);
          return st.is_ok() ? st : ours(q, o);
        };
        def.info.details.emplace_back("call", "the caller's own");
      }
      auto pr = OpTools<Op>::tuning_problem(ctx, p, *source, std::move(cands));
      if (pr.is_ok() && how.hooks && how.hooks->wrap_problem) return how.hooks->wrap_problem(std::move(*pr));
      return pr;
    };
    std::lock_guard<std::mutex> lock(slot.mu);
    decide_locked(ctx, slot, p, make, !capturing);
  }

  // The chosen candidate failed on these operands: "unsupported" at run time is normal (e.g.
  // pointers less aligned than the tuned buffers) and logged quietly; anything else is worth a
  // warning and a device recovery. Default runs instead.
  [[gnu::noinline]] static Status fall_back(Context& ctx, const Slot& slot, const Decision& c, const Params& p,
                                            const Operands& ops, const Status& st) {
    std::string msg =
        fmt::format("{}({}): {} {} ({}); running Default", slot.op_signature, slot.params_signature, c.solution,
                    st.is_unsupported() ? "does not apply to these operands" : "failed", st.message());
    if (st.is_unsupported()) {
      ctx.log().log(2, msg);
    } else {
      ctx.log().warn(msg);
      if (const DeviceRuntime* rt = ctx.runtime()) (void)rt->recover();
    }
    return c.fallback->run(p, ops);
  }
};

}  // namespace ops

// RandomOperands<Op> and OpTools<Op> (tunableop/op_tools.h), instantiated by each op's
// dispatch.cc (template class RandomOperands<MyOp>; template struct OpTools<MyOp>;).
template <class Op>
StatusOr<std::unique_ptr<RandomOperands<Op>>> RandomOperands<Op>::make(Context& ctx, const Params& params,
                                                                       uint64_t seed, void* stream) {
  using Def = ops::OpDefinition<Op>;
  std::unique_ptr<RandomOperands> b(new RandomOperands());
  b->params_ = Def::normalize(params);
  TUNABLEOP_RETURN_IF_ERROR(Def::validate(b->params_));
  b->runtime_ = ctx.runtime();
  if (!b->runtime_) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
  // Checked before anything is allocated (sizes come from callers and files): the host staging
  // copies, and on the CPU the operands themselves, must fit this machine.
  CheckedInt total = 0;
  for (const ops::BufferSpec& spec : Def::buffers(b->params_))
    total += CheckedInt(spec.elements) * int64_t(dtype_size(spec.dtype));
  const std::string what = "random operands of " + Def::params_signature(b->params_);
  TUNABLEOP_RETURN_IF_ERROR(check_available_memory(b->runtime_->kind == DeviceKind::kCpu ? total * 2 : total, what));
  if (b->runtime_->kind != DeviceKind::kCpu && b->runtime_->free_memory_bytes &&
      uint64_t(total.value()) > b->runtime_->free_memory_bytes())
    return Status::resource_exhausted(
        fmt::format("{} need {}, more than the {} free on {}", what, format_bytes(uint64_t(total.value())),
                    format_bytes(b->runtime_->free_memory_bytes()), ctx.device().to_string()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (const ops::BufferSpec& spec : Def::buffers(b->params_)) {
    std::vector<uint8_t> host(std::max<size_t>(spec.bytes(), dtype_size(spec.dtype)));
    // An op whose buffers hold more than numbers (attention's page tables and lengths) fills
    // those itself.
    bool filled = false;
    if constexpr (requires { Def::fill_random(b->params_, size_t{0}, host.data(), rng); })
      filled = Def::fill_random(b->params_, size_t(b->buffers_.size()), host.data(), rng);
    if (!filled)
      for (int64_t i = 0; i < spec.elements; ++i) store_from_double(spec.dtype, host.data(), i, dist(rng));
    auto m = b->runtime_->alloc(host.size());
    if (!m.is_ok()) return m.status();
    b->buffers_.push_back(*m);
    TUNABLEOP_RETURN_IF_ERROR(
        b->runtime_->copy(*m, host.data(), host.size(), DeviceRuntime::Copy::kHostToDevice, stream));
  }
  TUNABLEOP_RETURN_IF_ERROR(b->runtime_->synchronize(stream));
  b->operands_ = Def::bind(b->params_, ops::BoundBuffers{b->buffers_, stream, nullptr, 0});
  return b;
}

template <class Op>
RandomOperands<Op>::~RandomOperands() {
  for (void* p : buffers_) runtime_->free(p);
}

template <class Op>
std::vector<Candidate<Op>> OpTools<Op>::candidates(Context& ctx, const Params& p, int search_effort) {
  return ops::Dispatcher<Op>::candidates_for(ctx, p, search_effort);
}

template <class Op>
StatusOr<std::unique_ptr<TuningProblem>> OpTools<Op>::tuning_problem(Context& ctx, const Params& p,
                                                                     const Operands& source,
                                                                     std::vector<Candidate<Op>> candidates) {
  const DeviceRuntime* rt = ctx.runtime();
  if (!rt) return Status::unsupported("no runtime registered for " + ctx.device().to_string());
  const Options& o = ctx.options();
  auto pr = ops::OpTuningProblem<Op>::create(ops::OpDefinition<Op>::normalize(p), source, std::move(candidates), *rt,
                                             o.policy, ctx.log());
  if (!pr.is_ok()) return pr.status();
  return std::unique_ptr<TuningProblem>(std::move(*pr));
}

template <class Op>
StatusOr<TuningReport> OpTools<Op>::tune(Context& ctx, const Params& p, bool retune, void* stream) {
  return ops::Dispatcher<Op>::tune(ctx, p, retune, stream);
}

// Plan<Op>'s members, instantiated by each op's dispatch.cc (template class Plan<MyOp>;).
template <class Op>
Status Plan<Op>::run(const Operands& ops) const {
  if (!slot_) return ctx_ ? Status::ok() : Status::invalid_argument("run() on an empty Plan (use Context::plan)");
  TUNABLEOP_RETURN_IF_ERROR(ops::OpDefinition<Op>::check_operands(params_, ops));
  return ops::Dispatcher<Op>::run(*ctx_, *slot_, params_, ops);
}

template <class Op>
StatusOr<const PlanDecision<Op>*> Plan<Op>::decide(const Operands& ops, const PlanHooks<Op>& hooks) const {
  using D = ops::Dispatcher<Op>;
  if (!ctx_) return Status::invalid_argument("decide() on an empty Plan (use Context::plan)");
  if (!slot_) return static_cast<const PlanDecision<Op>*>(nullptr);
  TUNABLEOP_RETURN_IF_ERROR(ops::OpDefinition<Op>::check_operands(params_, ops));
  return status_boundary(
      [&] { return D::describe(params_); },
      [&]() -> StatusOr<const PlanDecision<Op>*> {
        return &D::decide(*ctx_, *slot_, params_, typename D::TuneOn{&ops, ops::OpDefinition<Op>::stream(ops), &hooks});
      });
}

template <class Op>
StatusOr<const PlanDecision<Op>*> Plan<Op>::prepare(void* stream) const {
  using D = ops::Dispatcher<Op>;
  if (!ctx_) return Status::invalid_argument("prepare() on an empty Plan (use Context::plan)");
  if (!slot_) return static_cast<const PlanDecision<Op>*>(nullptr);
  return status_boundary([&] { return D::describe(params_); },
                         [&]() -> StatusOr<const PlanDecision<Op>*> {
                           return &D::decide(*ctx_, *slot_, params_, typename D::TuneOn{nullptr, stream, nullptr});
                         });
}

template <class Op>
std::string Plan<Op>::solution() const {
  if (!slot_) return "";
  const PlanDecision<Op>* d = slot_->decision.load(std::memory_order_acquire);
  return d ? d->solution : "";
}

}  // namespace tunableop
