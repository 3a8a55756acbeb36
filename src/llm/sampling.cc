#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tunableop::llm {

Status validate_sampling_row(const SamplingRow& r, int64_t vocab) {
  if (!std::isfinite(r.temperature) || r.temperature < 0)
    return Status::invalid_argument("temperature must be a number >= 0, got " + std::to_string(r.temperature));
  if (r.top_k < 0)
    return Status::invalid_argument("top_k must be >= 0 (0: every token), got " + std::to_string(r.top_k));
  if (!std::isfinite(r.top_p) || r.top_p <= 0 || r.top_p > 1)
    return Status::invalid_argument("top_p must be in (0, 1], got " + std::to_string(r.top_p));
  if (vocab < 1) return Status::invalid_argument("sampling over an empty vocabulary");
  return Status::ok();
}

StatusOr<int32_t> sample_row(std::span<const float> logits, const SamplingRow& r) {
  const int64_t V = int64_t(logits.size());
  TUNABLEOP_RETURN_IF_ERROR(validate_sampling_row(r, V));
  float best = -INFINITY;
  int64_t arg = 0;
  for (int64_t i = 0; i < V; ++i) {
    const float v = logits[size_t(i)];
    if (std::isnan(v) || v == INFINITY) return Status::numerics("a NaN or +inf logit: cannot choose a token");
    if (v > best) best = v, arg = i;
  }
  if (r.greedy() || best == -INFINITY) return int32_t(arg);

  // top-k: the k-th largest logit is the floor of what stays.
  float floor = -INFINITY;
  if (r.top_k > 0 && r.top_k < V) {
    std::vector<float> copy(logits.begin(), logits.end());
    std::nth_element(copy.begin(), copy.begin() + (r.top_k - 1), copy.end(), std::greater<float>());
    floor = copy[size_t(r.top_k - 1)];
  }
  const float inv_t = 1.0f / r.temperature;
  std::vector<float> w(size_t(V), 0.0f);
  double total = 0;
  for (int64_t i = 0; i < V; ++i) {
    const float v = logits[size_t(i)];
    if (v >= floor) total += w[size_t(i)] = std::exp((v - best) * inv_t);
  }
  // top-p: bisection for the largest threshold whose kept mass is still >= top_p of the total.
  float tau = 0;
  if (r.top_p < 1) {
    const double want = double(r.top_p) * total;
    float lo = 0, hi = 2;
    for (int round = 0; round < kTopPRounds; ++round) {
      const float mid = 0.5f * (lo + hi);
      double mass = 0;
      for (float x : w) mass += x >= mid ? double(x) : 0.0;
      if (mass >= want)
        lo = mid;
      else
        hi = mid;
    }
    tau = lo;
  }
  double kept = 0;
  for (float x : w) kept += (x > 0 && x >= tau) ? double(x) : 0.0;
  const double u = uniform01(r.seed, r.counter) * kept;
  double run = 0;
  int64_t last = arg;
  for (int64_t i = 0; i < V; ++i) {
    const float x = w[size_t(i)];
    if (x <= 0 || x < tau) continue;
    run += double(x);
    last = i;
    if (u < run) return int32_t(i);
  }
  return int32_t(last);  // u within rounding of the kept mass
}

}  // namespace tunableop::llm
