#include "llm/linear_op.h"

#include "tunableop/attention.h"

namespace tunableop::llm {

LinearOp::Fn tunableop_linear(Context& ctx) {
  return [&ctx](DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
                void* stream) { return tunableop::linear(ctx, dtype, tokens, in, out, x, w, y, stream); };
}

LinearOp::GemmFn tunableop_gemm(Context& ctx) {
  return [&ctx](const GemmParams& p, const GemmOperands& ops) { return tunableop::gemm(ctx, p, ops); };
}

LinearOp::AttentionFn tunableop_attention(Context& ctx) {
  return [&ctx](const AttentionParams& p, const AttentionOperands& ops) { return tunableop::attention(ctx, p, ops); };
}

void LinearOp::count(std::vector<Problem>& list, Phase phase, std::string op, std::string params, double flops) {
  // Counting by the problem key the context tunes on is exactly "how many tunings this run
  // needs"; a linear scan is fine for the handful of problems a model has.
  std::lock_guard<std::mutex> lock(mu_);
  Problem* found = nullptr;
  for (Problem& pr : list) {
    if (pr.params == params && pr.op == op) {
      found = &pr;
      break;
    }
  }
  if (!found) {
    list.push_back({std::move(op), std::move(params)});
    found = &list.back();
  }
  (phase == Phase::kPrefill ? found->in_prefill : found->in_decode) = true;
  ++found->calls;
  if (phase == Phase::kPrefill) ++found->prefill_calls;
  found->flops = flops;
}

Status LinearOp::operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x,
                            const void* w, void* y, void* stream) {
  const GemmParams p = linear_params(dtype, tokens, in, out);
  count(problems_, phase, gemm_op_signature(p), gemm_params_signature(p), p.flops());
  return fn_(dtype, tokens, in, out, x, w, y, stream);
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
  attention_problems_.clear();
}

}  // namespace tunableop::llm
