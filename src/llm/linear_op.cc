#include "llm/linear_op.h"

namespace tunableop::llm {

LinearOp::Fn tunableop_linear(Context& ctx) {
  return [&ctx](DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
                void* stream) { return tunableop::linear(ctx, dtype, tokens, in, out, x, w, y, stream); };
}

LinearOp::GemmFn tunableop_gemm(Context& ctx) {
  return [&ctx](const GemmParams& p, const GemmOperands& ops) { return tunableop::gemm(ctx, p, ops); };
}

void LinearOp::count(Phase phase, const GemmParams& p) {
  // Counting by the problem key the context tunes on is exactly "how many tunings this run
  // needs"; a linear scan is fine for the handful of problems a model has.
  std::lock_guard<std::mutex> lock(mu_);
  std::string op = gemm_op_signature(p), params = gemm_params_signature(p);
  Problem* found = nullptr;
  for (Problem& pr : problems_) {
    if (pr.params == params && pr.op == op) {
      found = &pr;
      break;
    }
  }
  if (!found) {
    problems_.push_back({op, params});
    found = &problems_.back();
  }
  (phase == Phase::kPrefill ? found->in_prefill : found->in_decode) = true;
  ++found->calls;
  if (phase == Phase::kPrefill) ++found->prefill_calls;
  found->flops = p.flops();
}

Status LinearOp::operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x,
                            const void* w, void* y, void* stream) {
  count(phase, linear_params(dtype, tokens, in, out));
  return fn_(dtype, tokens, in, out, x, w, y, stream);
}

Status LinearOp::gemm(Phase phase, const GemmParams& p, const GemmOperands& ops) {
  if (!gemm_fn_) return Status::unsupported("this engine's LinearOp has no general GEMM");
  count(phase, p.with_defaults());
  return gemm_fn_(p, ops);
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

void LinearOp::add_calls(const std::vector<Problem>& calls, int64_t times) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Problem& c : calls) {
    Problem* found = nullptr;
    for (Problem& p : problems_) {
      if (p.op == c.op && p.params == c.params) found = &p;
    }
    if (!found) {
      problems_.push_back({c.op, c.params});
      found = &problems_.back();
    }
    found->in_prefill |= c.in_prefill;
    found->in_decode |= c.in_decode;
    found->calls += c.calls * times;
    found->prefill_calls += c.prefill_calls * times;
    found->flops = c.flops;
  }
}

std::vector<LinearOp::Problem> LinearOp::problems() const {
  std::lock_guard<std::mutex> lock(mu_);
  return problems_;
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
}

}  // namespace tunableop::llm
