#include "llm/engine.h"

namespace tunableop::llm {

LinearOp::Fn tunableop_linear(Context& ctx) {
  return [&ctx](DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w, void* y,
                void* stream) { return tunableop::linear(ctx, dtype, tokens, in, out, x, w, y, stream); };
}

Status LinearOp::operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x,
                            const void* w, void* y, void* stream) {
  {
    // Counting by the problem key the context tunes on is exactly "how many tunings this run
    // needs"; the strings are built only the first time a shape is seen.
    std::lock_guard<std::mutex> lock(mu_);
    GemmParams p = linear_params(dtype, tokens, in, out);
    std::string params = gemm_params_signature(p);
    Problem* found = nullptr;
    for (Problem& pr : problems_) {
      if (pr.params == params) {
        found = &pr;
        break;
      }
    }
    if (!found) {
      problems_.push_back({gemm_op_signature(p), params});
      found = &problems_.back();
    }
    (phase == Phase::kPrefill ? found->in_prefill : found->in_decode) = true;
    ++found->calls;
  }
  return fn_(dtype, tokens, in, out, x, w, y, stream);
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
