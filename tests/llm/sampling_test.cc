// The host sampling algorithm (llm/sampling.h), which the CPU device runs and the GPU kernel
// mirrors: greedy is the first argmax; top-k keeps the k largest logits (ties at the boundary
// kept); top-p keeps the most likely tokens until their mass reaches p; draws are reproducible
// from (seed, counter) and follow the distribution; bad parameters and non-finite logits are
// errors.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace tunableop::llm {
namespace {

SamplingRow row(float t, int32_t k, float p, uint64_t seed, uint64_t counter) {
  SamplingRow r;
  r.temperature = t, r.top_k = k, r.top_p = p, r.seed = seed, r.counter = counter;
  return r;
}

int32_t draw(const std::vector<float>& l, const SamplingRow& r) {
  auto t = sample_row(l, r);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : -1;
}

TEST(Sampling, GreedyIsTheFirstMaximum) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(draw(l, row(0, 0, 1, 1, 0)), 1);
  std::set<int32_t> seen;
  for (uint64_t c = 0; c < 200; ++c) seen.insert(draw(l, row(1.0f, 1, 1, 9, c)));  // top-k 1 keeps both maxima
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

TEST(Sampling, TopKAndTopPKeepTheRightSets) {
  // Weights at temperature 1: exp(l - 3) = 1, e^-1, e^-2, e^-3, e^-4 (mass ~1.575).
  const std::vector<float> l = {3.0f, 2.0f, 1.0f, 0.0f, -1.0f};
  std::set<int32_t> k2, p60, p70;
  for (uint64_t c = 0; c < 2000; ++c) {
    k2.insert(draw(l, row(1.0f, 2, 1, 3, c)));
    p60.insert(draw(l, row(1.0f, 0, 0.6f, 3, c)));  // 1 / 1.575 = 0.635 >= 0.6: the first token alone
    p70.insert(draw(l, row(1.0f, 0, 0.7f, 3, c)));  // needs the second too (0.869)
  }
  EXPECT_EQ(k2, (std::set<int32_t>{0, 1}));
  EXPECT_EQ(p60, (std::set<int32_t>{0}));
  EXPECT_EQ(p70, (std::set<int32_t>{0, 1}));
}

TEST(Sampling, DrawsAreReproducibleAndFollowTheDistribution) {
  const std::vector<float> l = {0.1f, 1.2f, -0.5f, 0.9f, 2.0f, -1.0f, 0.0f, 1.5f};
  EXPECT_EQ(draw(l, row(0.8f, 0, 1, 42, 17)), draw(l, row(0.8f, 0, 1, 42, 17)));
  const int n = 20000;
  std::vector<double> count(l.size(), 0);
  for (int c = 0; c < n; ++c) count[size_t(draw(l, row(0.8f, 0, 1, 42, uint64_t(c))))] += 1;
  double z = 0;
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp((l[i] - 2.0) / 0.8);
  double chi2 = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    const double want = n * p[i] / z;
    chi2 += (count[i] - want) * (count[i] - want) / want;
  }
  EXPECT_LT(chi2, 40.0);  // 7 degrees of freedom
}

TEST(Sampling, ErrorsNameWhatIsWrong) {
  const std::vector<float> l = {1.0f, 2.0f};
  EXPECT_FALSE(sample_row(l, row(-1, 0, 1, 0, 0)).is_ok());
  EXPECT_FALSE(sample_row(l, row(1, -2, 1, 0, 0)).is_ok());
  EXPECT_FALSE(sample_row(l, row(1, 0, 0, 0, 0)).is_ok());
  EXPECT_FALSE(sample_row(l, row(1, 0, 1.5f, 0, 0)).is_ok());
  EXPECT_FALSE(sample_row({}, row(1, 0, 1, 0, 0)).is_ok());
  const std::vector<float> bad = {1.0f, NAN};
  EXPECT_EQ(sample_row(bad, row(1, 0, 1, 0, 0)).status().code(), StatusCode::kNumericsMismatch);
}

}  // namespace
}  // namespace tunableop::llm
