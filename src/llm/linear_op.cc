#include "llm/linear_op.h"

#include <deque>
#include <memory>

#include "tunableop/attention.h"

namespace tunableop::llm {

namespace {

// The engine's linear layers through plans (the framework's hot path: a served call is one
// generation check and the chosen candidate, no strings, no locks): one plan per distinct shape,
// made at the shape's first call. A model has a handful of shapes, so a short list beats a map.
class LinearPlans {
 public:
  explicit LinearPlans(Context& ctx) : ctx_(ctx) {}

  Status run(DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
             void* stream) {
    const GemmPlan* plan = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);  // uncontended: the engine calls from one thread
      for (const Entry& e : plans_) {
        if (e.dtype == dtype && e.tokens == tokens && e.in == in && e.out == out) plan = &e.plan;
      }
      if (plan == nullptr) {
        auto made = make_plan(ctx_, linear_params(dtype, tokens, in, out));
        if (!made.is_ok()) return made.status();
        plans_.push_back({dtype, tokens, in, out, std::move(*made)});
        plan = &plans_.back().plan;
      }
    }
    return plan->run(GemmOperands{w, x, y, stream});
  }

 private:
  struct Entry {
    DType dtype;
    int64_t tokens, in, out;
    GemmPlan plan;
  };
  Context& ctx_;
  std::mutex mu_;
  std::deque<Entry> plans_;  // a deque: entries never move, so a found plan stays valid
};

bool same_problem(const ScaledGemmParams& a, const ScaledGemmParams& b) {
  return a.a_dtype == b.a_dtype && a.b_dtype == b.b_dtype && a.out_dtype == b.out_dtype &&
         a.bias_dtype == b.bias_dtype && a.scale_mode == b.scale_mode && a.transa == b.transa && a.transb == b.transb &&
         a.m == b.m && a.n == b.n && a.k == b.k && a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc;
}

// The fp8 projections' ScaledGemm problems, one plan each, made at a problem's first call.
class ScaledPlans {
 public:
  explicit ScaledPlans(Context& ctx) : ctx_(ctx) {}

  Status run(const ScaledGemmParams& p, const ScaledGemmOperands& ops) {
    const ScaledGemmPlan* plan = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Entry& e : plans_) {
        if (same_problem(e.params, p)) plan = &e.plan;
      }
      if (plan == nullptr) {
        auto made = make_plan(ctx_, p);
        if (!made.is_ok()) return made.status();
        plans_.push_back({p, std::move(*made)});
        plan = &plans_.back().plan;
      }
    }
    return plan->run(ops);
  }

 private:
  struct Entry {
    ScaledGemmParams params;
    ScaledGemmPlan plan;
  };
  Context& ctx_;
  std::mutex mu_;
  std::deque<Entry> plans_;
};
}  // namespace

LinearOp::Fn tunableop_linear(Context& ctx) {
  auto plans = std::make_shared<LinearPlans>(ctx);
  return [plans](DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
                 void* stream) { return plans->run(dtype, tokens, in, out, x, w, y, stream); };
}

LinearOp::ScaledFn tunableop_scaled_linear(Context& ctx) {
  auto plans = std::make_shared<ScaledPlans>(ctx);
  return [plans](const ScaledGemmParams& p, const ScaledGemmOperands& ops) { return plans->run(p, ops); };
}

LinearOp::GemmFn tunableop_gemm(Context& ctx) {
  return [&ctx](const GemmParams& p, const GemmOperands& ops) { return tunableop::gemm(ctx, p, ops); };
}

LinearOp::AttentionFn tunableop_attention(Context& ctx) {
  return [&ctx](const AttentionParams& p, const AttentionOperands& ops) { return tunableop::attention(ctx, p, ops); };
}

namespace {

// The problem's index in `list`, appended at its first sight. A linear scan is fine for the
// handful of problems a model has.
size_t find_or_add(std::vector<LinearOp::Problem>& list, std::string op, std::string params) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].params == params && list[i].op == op) return i;
  }
  list.push_back({std::move(op), std::move(params)});
  return list.size() - 1;
}

void add_call(LinearOp::Problem& p, Phase phase) {
  (phase == Phase::kPrefill ? p.in_prefill : p.in_decode) = true;
  ++p.calls;
  if (phase == Phase::kPrefill) ++p.prefill_calls;
}

}  // namespace

void LinearOp::count(std::vector<Problem>& list, Phase phase, std::string op, std::string params, double flops) {
  // Counting by the problem key the context tunes on is exactly "how many tunings this run needs".
  std::lock_guard<std::mutex> lock(mu_);
  Problem& found = list[find_or_add(list, std::move(op), std::move(params))];
  add_call(found, phase);
  found.flops = flops;
}

Status LinearOp::operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x,
                            const void* w, void* y, void* stream) {
  count_linear(phase, dtype, tokens, in, out);
  return fn_(dtype, tokens, in, out, x, w, y, stream);
}

Status LinearOp::scaled(Phase phase, int64_t tokens, int64_t in, int64_t out, const void* x, const float* x_scale,
                        const void* w, const float* w_scale, void* y, void* stream) {
  if (!scaled_fn_) return Status::unsupported("this engine's LinearOp has no fp8 (ScaledGemm) function");
  count_linear(phase, DType::kF8E4M3, tokens, in, out);
  ScaledGemmOperands o;
  o.a = w, o.b = x, o.scale_a = w_scale, o.scale_b = x_scale, o.c = y, o.stream = stream;
  return scaled_fn_(scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, tokens, in, out), o);
}

// A linear call's problem: a GEMM in `dtype`, or the fp8 projections' ScaledGemm (dtype e4m3).
void LinearOp::count_linear(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out) {
  // Strings only at a shape's first call: after that a call is counted by its index.
  std::lock_guard<std::mutex> lock(mu_);
  size_t index = problems_.size();
  for (const LinearShape& s : linear_shapes_) {
    if (s.dtype == dtype && s.tokens == tokens && s.in == in && s.out == out) {
      index = s.index;
      break;
    }
  }
  if (index == problems_.size()) {
    if (dtype == DType::kF8E4M3) {
      const ScaledGemmParams p =
          scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, tokens, in, out).with_defaults();
      index = find_or_add(problems_, scaled_gemm_op_signature(p), scaled_gemm_params_signature(p));
      problems_[index].flops = p.flops();
    } else {
      const GemmParams p = linear_params(dtype, tokens, in, out);
      index = find_or_add(problems_, gemm_op_signature(p), gemm_params_signature(p));
      problems_[index].flops = p.flops();
    }
    linear_shapes_.push_back({dtype, tokens, in, out, index});
  }
  add_call(problems_[index], phase);
}

Status LinearOp::gemm(Phase phase, const GemmParams& p, const GemmOperands& ops) {
  if (!gemm_fn_) return Status::unsupported("this engine's LinearOp has no general GEMM");
  const GemmParams q = p.with_defaults();
  count(problems_, phase, gemm_op_signature(q), gemm_params_signature(q), q.flops());
  return gemm_fn_(p, ops);
}

Status LinearOp::attention(Phase phase, const AttentionParams& p, const AttentionOperands& ops) {
  if (!attention_fn_) return Status::unsupported("this engine's LinearOp has no attention");
  const AttentionParams q = p.with_defaults();
  count(attention_problems_, phase, attention_op_signature(q), attention_params_signature(q), q.flops());
  return attention_fn_(q, ops);
}

std::vector<LinearOp::Problem> LinearOp::difference(const std::vector<Problem>& before,
                                                    const std::vector<Problem>& after) {
  std::vector<Problem> d;
  for (const Problem& a : after) {
    int64_t prior = 0, prior_prefill = 0;
    for (const Problem& b : before) {
      if (b.op == a.op && b.params == a.params) prior = b.calls, prior_prefill = b.prefill_calls;
    }
    if (a.calls > prior) {
      d.push_back(a);
      d.back().calls = a.calls - prior;
      d.back().prefill_calls = a.prefill_calls - prior_prefill;
    }
  }
  return d;
}

namespace {
void credit(std::vector<LinearOp::Problem>& list, const std::vector<LinearOp::Problem>& calls, int64_t times) {
  for (const LinearOp::Problem& c : calls) {
    LinearOp::Problem* found = nullptr;
    for (LinearOp::Problem& p : list) {
      if (p.op == c.op && p.params == c.params) found = &p;
    }
    if (!found) {
      list.push_back({c.op, c.params});
      found = &list.back();
    }
    found->in_prefill |= c.in_prefill;
    found->in_decode |= c.in_decode;
    found->calls += c.calls * times;
    found->prefill_calls += c.prefill_calls * times;
    found->flops = c.flops;
  }
}
}  // namespace

void LinearOp::add_calls(const std::vector<Problem>& calls, int64_t times) {
  std::lock_guard<std::mutex> lock(mu_);
  credit(problems_, calls, times);
}

void LinearOp::add_attention_calls(const std::vector<Problem>& calls, int64_t times) {
  std::lock_guard<std::mutex> lock(mu_);
  credit(attention_problems_, calls, times);
}

std::vector<LinearOp::Problem> LinearOp::problems() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problems_;
}

std::vector<LinearOp::Problem> LinearOp::attention_problems() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attention_problems_;
}

int64_t LinearOp::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const Problem& p : problems_) n += p.calls;
  return n;
}

void LinearOp::reset_counts() {
  std::lock_guard<std::mutex> lock(mu_);
  problems_.clear();
  linear_shapes_.clear();
  attention_problems_.clear();
}

}  // namespace tunableop::llm
