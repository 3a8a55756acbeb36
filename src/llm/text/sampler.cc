#include "llm/text/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tunableop::llm {

Status SamplingOptions::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) {
    return Status::invalid_argument("temperature must be a number >= 0 (0 = greedy), got " +
                                    std::to_string(temperature));
  }
  if (top_k < 0) return Status::invalid_argument("top-k must be >= 0 (0 = all tokens), got " + std::to_string(top_k));
  if (!std::isfinite(top_p) || top_p <= 0 || top_p > 1) {
    return Status::invalid_argument("top-p must be in (0, 1] (1 = all tokens), got " + std::to_string(top_p));
  }
  return Status::ok();
}

std::string SamplingOptions::describe() const {
  if (greedy()) return "greedy";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "temperature %g, top-k %lld, top-p %g, seed %llu", temperature, (long long)top_k,
                top_p, (unsigned long long)seed);
  return buf;
}

Sampler::Sampler(const SamplingOptions& o) : o_(o) {}

std::mt19937_64& Sampler::generator(int64_t sequence) {
  while (int64_t(generators_.size()) <= sequence) {
    // splitmix64 of (seed, sequence): neighbouring seeds and sequences get unrelated streams.
    uint64_t z = o_.seed + 0x9E3779B97F4A7C15ull * (uint64_t(generators_.size()) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    generators_.emplace_back(z ^ (z >> 31));
  }
  return generators_[size_t(sequence)];
}

StatusOr<int32_t> Sampler::sample(int64_t sequence, std::span<const float> logits) {
  const int64_t vocab = int64_t(logits.size());
  if (vocab == 0) return Status::invalid_argument("sampling from an empty row of logits");
  if (o_.greedy()) return Status::invalid_argument("Sampler used with temperature 0 (greedy needs no sampler)");
  float best = -INFINITY;
  for (float v : logits) {
    if (std::isnan(v) || v == INFINITY) {
      return Status::numerics("the model produced a NaN or +inf logit: cannot sample (sequence " +
                              std::to_string(sequence) + ")");
    }
    best = std::max(best, v);
  }
  if (best == -INFINITY) return Status::numerics("every logit is -inf: nothing to sample");

  // Candidates: tokens within 1e-12 of the most likely one's probability. The rest together
  // hold under vocab x 1e-12 of the mass, so they can never be inside a top-p set (p < 1 - 1e-6)
  // and would be drawn with a probability below 3e-7 on a 256K vocabulary; skipping them spares
  // an exp() each.
  const double inv_t = 1.0 / o_.temperature;
  const double floor = double(best) - 27.64 * o_.temperature;  // exp(-27.64) < 1e-12
  order_.clear();
  for (int64_t id = 0; id < vocab; ++id) {
    if (double(logits[id]) >= floor) order_.push_back(int32_t(id));
  }
  // Most likely first; ties go to the lower id (as argmax), so the order is total and every
  // std::sort/nth_element implementation agrees on it.
  auto more_likely = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t sorted = 0;  // order_[0, sorted) is the sorted head
  auto sort_head = [&](size_t head) {
    head = std::min(head, order_.size());
    if (head <= sorted) return;
    if (head < order_.size())
      std::nth_element(order_.begin() + ptrdiff_t(sorted), order_.begin() + ptrdiff_t(head), order_.end(), more_likely);
    std::sort(order_.begin() + ptrdiff_t(sorted), order_.begin() + ptrdiff_t(head), more_likely);
    sorted = head;
  };
  if (o_.top_k > 0 && size_t(o_.top_k) < order_.size()) {
    sort_head(size_t(o_.top_k));
    order_.resize(size_t(o_.top_k));
  }
  weights_.resize(size_t(vocab));
  double total = 0;
  for (int32_t id : order_) total += weights_[size_t(id)] = std::exp((double(logits[id]) - double(best)) * inv_t);
  auto weight = [&](int32_t id) { return weights_[size_t(id)]; };

  // Top-p: the kept prefix of the sorted candidates. Sorting a whole 256K vocabulary per token
  // would cost more than a decode step, so a head is sorted and grown until it holds the mass.
  size_t kept = order_.size();
  if (o_.top_p < 1) {
    const double limit = o_.top_p * total;
    double above = 0;
    kept = 0;
    for (size_t head = 256;; head *= 4) {
      sort_head(head);
      while (kept < sorted && above < limit) above += weight(order_[kept++]);
      if (above >= limit || sorted == order_.size()) break;
    }
  }

  double mass = 0;
  for (size_t i = 0; i < kept; ++i) mass += weight(order_[i]);
  // 53 random bits -> [0, 1) exactly (uniform_real_distribution's result is implementation-defined).
  const double u = double(generator(sequence)() >> 11) * 0x1.0p-53 * mass;
  double cum = 0;
  for (size_t i = 0; i < kept; ++i) {
    cum += weight(order_[i]);
    if (u < cum) return order_[i];
  }
  return order_[kept - 1];  // u within rounding of the total
}

namespace {

class GreedySelector final : public TokenSelector {
 public:
  Status select(Engine&, const std::vector<int32_t>& greedy, std::vector<int32_t>* next) override {
    *next = greedy;
    return Status::ok();
  }
  std::string describe() const override { return "greedy"; }
};

class HostSamplingSelector final : public TokenSelector {
 public:
  explicit HostSamplingSelector(const SamplingOptions& o) : sampler_(o) {}
  Status select(Engine& engine, const std::vector<int32_t>& greedy, std::vector<int32_t>* next) override {
    TUNABLEOP_RETURN_IF_ERROR(engine.last_logits(&logits_));
    const size_t vocab = size_t(engine.config().vocab_size);
    if (logits_.size() != greedy.size() * vocab) {
      return Status::internal("last_logits returned " + std::to_string(logits_.size()) + " values for " +
                              std::to_string(greedy.size()) + " sequences of vocabulary " + std::to_string(vocab));
    }
    next->resize(greedy.size());
    for (size_t b = 0; b < greedy.size(); ++b) {
      auto t = sampler_.sample(int64_t(b), std::span<const float>(logits_.data() + b * vocab, vocab));
      if (!t.is_ok()) return t.status();
      (*next)[b] = *t;
    }
    return Status::ok();
  }
  std::string describe() const override { return sampler_.options().describe() + " (host sampler)"; }

 private:
  Sampler sampler_;
  std::vector<float> logits_;
};

}  // namespace

std::unique_ptr<TokenSelector> make_token_selector(const SamplingOptions& o) {
  if (o.greedy()) return std::make_unique<GreedySelector>();
  return std::make_unique<HostSamplingSelector>(o);
}

}  // namespace tunableop::llm
