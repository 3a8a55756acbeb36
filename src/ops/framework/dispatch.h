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

// What a slot runs now. Immutable once published; kept until the context dies, so the hot
// path may hold it without a reference count.
template <class Op>
struct PlanChoice {
  const Candidate<Op>* candidate = nullptr;  // null: nothing can run here, `error` says why
  const Candidate<Op>* fallback = nullptr;   // Default, when `candidate` is another one
  std::string name;
  Status error;
};

// One problem of one op in one context.
template <class Op>
struct PlanSlot {
  PlanSlot(const ops::ProblemKey& k, uint64_t h) : key(k), hash(h) {}
  const ops::ProblemKey key;
  const uint64_t hash;
  std::atomic<uint64_t> generation{0};  // the context generation `choice` was made for (0: none yet)
  std::atomic<const PlanChoice<Op>*> choice{nullptr};
  // Written once, before the first choice is published.
  std::string op_signature, params_signature;
  // Slow path only, under mu.
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Candidate<Op>>> resolved;  // by name; null: does not apply
  std::vector<std::unique_ptr<const PlanChoice<Op>>> choices;            // every choice ever published
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
  using Choice = detail::PlanChoice<Op>;

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
    if (slot.generation.load(std::memory_order_acquire) != ctx.generation()) revalidate(ctx, slot, p, ops);
    const Choice* c = slot.choice.load(std::memory_order_acquire);
    if (!c->candidate) return c->error;
    Status st = c->candidate->run(p, ops);
    if (st.is_ok() || !c->fallback) return st;
    return fall_back(ctx, slot, *c, p, ops, st);
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

  // The candidate `name` (static, or rebuilt by its family) when it supports p, resolved once
  // per problem and kept with its slot; null when it does not apply. For callers that make
  // their own decisions through Context::choose (the interposer).
  static std::shared_ptr<const Cand> cached_candidate(Context& ctx, const Params& params, const std::string& name) {
    const Params p = Def::normalize(params);
    Slot& slot = slot_for(ctx, p);
    std::lock_guard<std::mutex> lock(slot.mu);
    resolved(ctx, slot, p, name);
    return slot.resolved.at(name);
  }

  static Slot& slot_for(Context& ctx, const Params& p) {
    const ProblemKey key = Def::key(p);
    return ctx.op_state<State>().table.find_or_insert(
        key, key.hash(), [](const ProblemKey& k, uint64_t h) { return std::make_unique<Slot>(k, h); });
  }

 private:
  struct State {
    SlotTable<Slot> table;
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

  // The context's settings or results changed since the slot decided (or it never did):
  // decide again through Context::choose (which may tune on these operands).
  [[gnu::noinline]] static void revalidate(Context& ctx, Slot& slot, const Params& p, const Operands& ops) {
    std::lock_guard<std::mutex> lock(slot.mu);
    const uint64_t g = ctx.generation();  // decide for this state; a later change revalidates again
    if (slot.generation.load(std::memory_order_relaxed) == g) return;  // another thread just did
    if (slot.op_signature.empty()) {
      slot.op_signature = Def::op_signature(p);
      slot.params_signature = Def::params_signature(p);
    }
    auto is_valid = [&](const std::string& name) { return resolved(ctx, slot, p, name) != nullptr; };
    auto make = [&]() { return make_problem(ctx, p, ops); };
    auto chosen = ctx.choose(slot.op_signature, slot.params_signature, is_valid, make);
    std::string name = chosen.is_ok() ? *chosen : "Default";
    const Cand* def = resolved(ctx, slot, p, "Default");
    const Cand* cand = resolved(ctx, slot, p, name);
    if (!cand) {
      cand = def;
      name = "Default";
    }
    const Cand* fallback = cand == def ? nullptr : def;
    const Choice* cur = slot.choice.load(std::memory_order_relaxed);
    if (!cur || cur->candidate != cand || cur->fallback != fallback) {
      auto c = std::make_unique<Choice>();
      c->candidate = cand;
      c->fallback = fallback;
      c->name = cand ? name : "";
      if (!cand)
        c->error = Status::unsupported(fmt::format("no Default {} supports {}({}) on {}", Def::kName, slot.op_signature,
                                                   slot.params_signature, ctx.device().to_string()));
      slot.choice.store(c.get(), std::memory_order_release);
      slot.choices.push_back(std::move(c));
    }
    slot.generation.store(g, std::memory_order_release);
  }

  // The chosen candidate failed on these operands: "unsupported" at run time is normal (e.g.
  // pointers less aligned than the tuned buffers) and logged quietly; anything else is worth a
  // warning and a device recovery. Default runs instead.
  [[gnu::noinline]] static Status fall_back(Context& ctx, const Slot& slot, const Choice& c, const Params& p,
                                            const Operands& ops, const Status& st) {
    std::string msg =
        fmt::format("{}({}): {} {} ({}); running Default", slot.op_signature, slot.params_signature, c.name,
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
  TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(b->runtime_->kind == DeviceKind::kCpu ? total * 2 : total,
                                                  "random operands of " + Def::params_signature(b->params_)));
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
std::string Plan<Op>::solution() const {
  if (!slot_) return "";
  const detail::PlanChoice<Op>* c = slot_->choice.load(std::memory_order_acquire);
  return c ? c->name : "";
}

}  // namespace tunableop
