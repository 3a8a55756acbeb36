#include "llm/engine.h"

#include <cmath>

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

AttentionGemms prefill_attention_gemms(const ModelConfig& c, DType dtype, int64_t seqs, int64_t tokens,
                                       int64_t max_seq) {
  const int64_t hd = c.head_dim, T = tokens, M = tokens * (c.num_heads / c.num_kv_heads);
  AttentionGemms g;
  GemmParams& s = g.scores;
  s.dtype = dtype;
  s.transa = 'T';
  s.transb = 'N';
  s.m = T;
  s.n = M;
  s.k = hd;
  s.lda = hd;
  s.ldb = hd;
  s.ldc = T;
  s.alpha = 1.0 / std::sqrt(double(hd));
  s.batch = seqs * c.num_kv_heads;
  s.stride_a = max_seq * hd;
  s.stride_b = M * hd;
  s.stride_c = M * T;
  GemmParams& o = g.output;
  o.dtype = dtype;
  o.transa = 'N';
  o.transb = 'N';
  o.m = hd;
  o.n = M;
  o.k = T;
  o.lda = hd;
  o.ldb = T;
  o.ldc = hd;
  o.batch = seqs * c.num_kv_heads;
  o.stride_a = max_seq * hd;
  o.stride_b = M * T;
  o.stride_c = M * hd;
  return g;
}

Status check_prompts(const ModelConfig& c, const EngineOptions& o, const std::vector<std::vector<int32_t>>& prompts) {
  if (prompts.empty()) return Status::invalid_argument("prefill: no prompts");
  if (int64_t(prompts.size()) > o.max_batch) {
    return Status::invalid_argument("prefill: batch " + std::to_string(prompts.size()) + " exceeds max_batch " +
                                    std::to_string(o.max_batch));
  }
  int64_t longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) return Status::invalid_argument("prefill: prompt " + std::to_string(b) + " is empty");
    for (int32_t id : prompts[b]) {
      if (id < 0 || id >= c.vocab_size) {
        return Status::invalid_argument("prefill: token id " + std::to_string(id) + " in prompt " + std::to_string(b) +
                                        " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
      }
    }
    longest = std::max<int64_t>(longest, int64_t(prompts[b].size()));
  }
  if (round_up(longest, o.pad_multiple) > o.max_seq) {
    return Status::invalid_argument("prefill: prompt of " + std::to_string(longest) + " tokens (padded to " +
                                    std::to_string(round_up(longest, o.pad_multiple)) +
                                    ") does not fit the KV cache of " + std::to_string(o.max_seq) + " positions");
  }
  return Status::ok();
}

}  // namespace tunableop::llm
