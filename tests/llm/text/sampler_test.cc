// The host sampler on hand-made logits: top-k = 1 is argmax (ties to the lower id), the
// frequencies follow softmax(logits / T), top-k and top-p keep exactly the sets transformers
// keeps, a seed gives the same draws and another seed other draws, and bad logits are errors.
#include "llm/text/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace tunableop::llm {
namespace {

SamplingOptions opts(double t, int64_t k = 0, double p = 1, uint64_t seed = 1) {
  SamplingOptions o;
  o.temperature = t;
  o.top_k = k;
  o.top_p = p;
  o.seed = seed;
  return o;
}

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double v : p) l.push_back(float(std::log(v)));
  return l;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    auto t = s.sample(0, logits);
    EXPECT_TRUE(t.is_ok());
    f[size_t(*t)] += 1.0 / draws;
  }
  return f;
}

TEST(Sampler, ValidatesOptions) {
  EXPECT_TRUE(opts(0).validate().is_ok());
  EXPECT_TRUE(opts(0.7, 40, 0.9).validate().is_ok());
  EXPECT_FALSE(opts(-1).validate().is_ok());
  EXPECT_FALSE(opts(NAN).validate().is_ok());
  EXPECT_FALSE(opts(INFINITY).validate().is_ok());
  EXPECT_FALSE(opts(1, -1).validate().is_ok());
  EXPECT_FALSE(opts(1, 0, 0).validate().is_ok());
  EXPECT_FALSE(opts(1, 0, 1.5).validate().is_ok());
  EXPECT_EQ(opts(0).describe(), "greedy");
  EXPECT_EQ(opts(0.5, 3, 0.9, 7).describe(), "temperature 0.5, top-k 3, top-p 0.9, seed 7");
}

TEST(Sampler, TopKOneIsArgmaxWithTiesToTheLowerId) {
  Sampler s(opts(1.5, 1));
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*s.sample(0, logits), 1);
  Sampler cold(opts(1e-4));  // a tiny temperature is argmax in practice too
  for (int i = 0; i < 50; ++i) EXPECT_EQ(*cold.sample(0, std::vector<float>{0.1f, 0.3f, 0.2f}), 1);
}

TEST(Sampler, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  for (double t : {1.0, 2.0, 0.5}) {
    Sampler s(opts(t, 0, 1, 11));
    auto f = frequencies(s, log_probs(p), 40000);
    double z = 0;
    for (double v : p) z += std::pow(v, 1 / t);
    for (size_t i = 0; i < p.size(); ++i) {
      const double want = std::pow(p[i], 1 / t) / z;
      // 40000 draws: standard error <= 0.0025; the seed is fixed, so this cannot flake.
      EXPECT_NEAR(f[i], want, 0.012) << "T " << t << " token " << i;
    }
  }
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  Sampler s(opts(1, 2, 1, 3));
  auto f = frequencies(s, log_probs({0.1, 0.4, 0.2, 0.3}), 20000);
  EXPECT_EQ(f[0], 0);
  EXPECT_EQ(f[2], 0);
  EXPECT_NEAR(f[1], 4.0 / 7, 0.015);
  EXPECT_NEAR(f[3], 3.0 / 7, 0.015);
}

// transformers keeps a token while the mass ranked above it is below top_p.
TEST(Sampler, TopPKeepsTheSmallestHeadReachingP) {
  const auto logits = log_probs({0.5, 0.3, 0.15, 0.05});
  for (auto [p, kept] : std::vector<std::pair<double, size_t>>{{0.3, 1}, {0.49, 1}, {0.51, 2}, {0.79, 2}, {0.81, 3}}) {
    Sampler s(opts(1, 0, p, 5));
    auto f = frequencies(s, logits, 4000);
    for (size_t i = 0; i < f.size(); ++i) {
      if (i < kept) {
        EXPECT_GT(f[i], 0) << "top-p " << p << " token " << i;
      } else {
        EXPECT_EQ(f[i], 0) << "top-p " << p << " token " << i;
      }
    }
  }
  // top-k first, then top-p over what top-k kept (renormalised): {0.5, 0.3} -> 0.625, 0.375.
  Sampler s(opts(1, 2, 0.6, 5));
  auto f = frequencies(s, logits, 2000);
  EXPECT_EQ(f[1] + f[2] + f[3], 0);
}

// A large vocabulary whose top-p set is longer than the first sorted head (256): the head grows
// until it holds the mass, and nothing outside the set is drawn.
TEST(Sampler, TopPOnALargeFlatVocabulary) {
  const int vocab = 300000, hot = 1000;
  std::vector<float> logits(vocab, -30.0f);
  for (int i = 0; i < hot; ++i) logits[size_t(i) * 97 % vocab] = 2.0f + 1e-4f * float(i % 7);
  Sampler s(opts(1, 0, 0.9, 9));
  std::set<int32_t> seen;
  for (int i = 0; i < 1000; ++i) {
    auto t = s.sample(0, logits);
    ASSERT_TRUE(t.is_ok());
    ASSERT_GT(logits[size_t(*t)], 0) << "drew a token outside the nucleus";
    seen.insert(*t);
  }
  EXPECT_GT(seen.size(), 400u);  // far past the first head of 256
}

TEST(Sampler, SameSeedSameDrawsOtherSeedOtherDraws) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)));
  auto draw = [&](uint64_t seed, int64_t sequence) {
    Sampler s(opts(1, 0, 1, seed));
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(*s.sample(sequence, logits));
    return out;
  };
  EXPECT_EQ(draw(42, 0), draw(42, 0));
  EXPECT_NE(draw(42, 0), draw(43, 0));
  EXPECT_NE(draw(42, 0), draw(42, 1));  // each sequence of a batch has its own stream
  // A sequence's draws do not depend on how often the others drew.
  Sampler a(opts(1, 0, 1, 42)), b(opts(1, 0, 1, 42));
  std::vector<int32_t> interleaved, alone;
  for (int i = 0; i < 40; ++i) {
    (void)a.sample(0, logits);
    interleaved.push_back(*a.sample(1, logits));
    alone.push_back(*b.sample(1, logits));
  }
  EXPECT_EQ(interleaved, alone);
}

TEST(Sampler, NeverDrawsMaskedTokens) {
  const std::vector<float> logits = {-INFINITY, 0.0f, -INFINITY, 0.0f};
  Sampler s(opts(3, 0, 1, 2));
  auto f = frequencies(s, logits, 2000);
  EXPECT_EQ(f[0] + f[2], 0);
  EXPECT_NEAR(f[1], 0.5, 0.05);
}

TEST(Sampler, BadLogitsAreErrors) {
  Sampler s(opts(1));
  EXPECT_EQ(s.sample(0, std::vector<float>{0.0f, NAN}).status().code(), StatusCode::kNumericsMismatch);
  EXPECT_FALSE(s.sample(0, std::vector<float>{INFINITY, 0.0f}).is_ok());
  EXPECT_FALSE(s.sample(0, std::vector<float>{-INFINITY, -INFINITY}).is_ok());
  EXPECT_FALSE(s.sample(0, std::vector<float>{}).is_ok());
  Sampler greedy(opts(0));
  EXPECT_FALSE(greedy.sample(0, std::vector<float>{1.0f}).is_ok());
}

}  // namespace
}  // namespace tunableop::llm
