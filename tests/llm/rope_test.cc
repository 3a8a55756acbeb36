// RoPE's inverse frequencies per rope_type against fp64 formulas written from their papers and
// reference implementations (Meta's Llama 3.1 apply_scaling, YaRN's ramp), on the released
// configs that use them (Llama-3.1-8B, Qwen2.5's YaRN recipe); the table's attention factor;
// dynamic NTK refused past max_position_embeddings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "llm/rope.h"

namespace tunableop::llm {
namespace {

ModelConfig with_rope(int64_t head_dim, double theta, int64_t max_pos) {
  ModelConfig c;
  c.vocab_size = 16, c.hidden_size = 64, c.intermediate_size = 16, c.num_layers = 1;
  c.num_heads = 1, c.num_kv_heads = 1, c.head_dim = head_dim, c.rope_theta = theta;
  c.max_position_embeddings = max_pos;
  return c;
}

std::vector<double> plain(const ModelConfig& c) {
  std::vector<double> f(size_t(c.head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim));
  return f;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel = 2e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], rel * want[i]) << "frequency " << i;
}

TEST(Rope, DefaultAndLinear) {
  ModelConfig c = with_rope(128, 10000.0, 4096);
  expect_close(rope_frequencies(c).inv_freq, plain(c));
  c.rope.type = RopeType::kLinear, c.rope.factor = 4;
  std::vector<double> want = plain(c);
  for (double& f : want) f /= 4;
  expect_close(rope_frequencies(c).inv_freq, want);
  EXPECT_EQ(rope_frequencies(c).attention_factor, 1.f);
}

// meta-llama/Llama-3.1-8B: theta 500000, factor 8, low 1, high 4, original 8192.
TEST(Rope, Llama3MatchesMetasScaling) {
  ModelConfig c = with_rope(128, 500000.0, 131072);
  c.rope.type = RopeType::kLlama3;
  c.rope.factor = 8, c.rope.low_freq_factor = 1, c.rope.high_freq_factor = 4;
  c.rope.original_max_position_embeddings = 8192;
  const double low_wavelen = 8192.0 / 1, high_wavelen = 8192.0 / 4;
  std::vector<double> want;
  int kept = 0, divided = 0, smoothed = 0;
  for (double f : plain(c)) {
    const double wavelen = 2 * M_PI / f;
    if (wavelen < high_wavelen) {
      want.push_back(f), ++kept;
    } else if (wavelen > low_wavelen) {
      want.push_back(f / 8), ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
      want.push_back((1 - smooth) * f / 8 + smooth * f), ++smoothed;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);  // all three bands occur at these settings
  expect_close(rope_frequencies(c).inv_freq, want);
  EXPECT_EQ(rope_frequencies(c).attention_factor, 1.f);
}

// Qwen2.5's long-context recipe: yarn, factor 4, original 32768, theta 1e6, head_dim 128.
TEST(Rope, YarnMatchesThePapersRampAndAttentionFactor) {
  ModelConfig c = with_rope(128, 1e6, 131072);
  c.rope.type = RopeType::kYarn;
  c.rope.factor = 4, c.rope.original_max_position_embeddings = 32768;
  const double d = 128;
  auto dim_of = [&](double rotations) { return d * std::log(32768.0 / (rotations * 2 * M_PI)) / (2 * std::log(1e6)); };
  const double low = std::max(std::floor(dim_of(32)), 0.0), high = std::min(std::ceil(dim_of(1)), d - 1);
  std::vector<double> want;
  for (size_t i = 0; i < 64; ++i) {
    const double extra = std::pow(1e6, -2.0 * double(i) / d), inter = extra / 4;
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    want.push_back(inter * ramp + extra * (1 - ramp));  // extrapolated below low, interpolated above high
  }
  const RopeFrequencies f = rope_frequencies(c);
  expect_close(f.inv_freq, want);
  EXPECT_FLOAT_EQ(f.attention_factor, float(0.1 * std::log(4.0) + 1));
  c.rope.attention_factor = 0.75;  // given explicitly
  EXPECT_FLOAT_EQ(rope_frequencies(c).attention_factor, 0.75f);

  // The table carries the factor on cos and sin.
  c.rope.attention_factor = 0;
  const RopeTable t = make_rope_table(c, 3);
  for (int64_t i = 0; i < t.half; ++i) {
    EXPECT_FLOAT_EQ(t.cos[size_t(i)], f.attention_factor);  // position 0: cos 1, sin 0
    EXPECT_NEAR(t.cos[size_t(2 * t.half + i)], std::cos(2.0 * f.inv_freq[size_t(i)]) * f.attention_factor, 1e-6);
    EXPECT_NEAR(t.sin[size_t(2 * t.half + i)], std::sin(2.0 * f.inv_freq[size_t(i)]) * f.attention_factor, 1e-6);
  }
}

TEST(Rope, DynamicIsTheDefaultWithinMaxPositionsAndRefusedBeyond) {
  ModelConfig c = with_rope(64, 10000.0, 256);
  c.rope.type = RopeType::kDynamic, c.rope.factor = 2;
  expect_close(rope_frequencies(c).inv_freq, plain(c));
  EXPECT_TRUE(check_rope_positions(c, 256, "m").is_ok());
  Status st = check_rope_positions(c, 257, "m/config.json");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("m/config.json"), std::string::npos);
  EXPECT_NE(st.message().find("dynamic"), std::string::npos);
  c.rope.type = RopeType::kLinear;
  EXPECT_TRUE(check_rope_positions(c, 100000, "m").is_ok());
}

TEST(Rope, PlainTableMatchesTheConfigForm) {
  const ModelConfig c = with_rope(32, 500.0, 64);
  const RopeTable a = make_rope_table(c, 20), b = make_rope_table(32, 500.0, 20);
  EXPECT_EQ(a.cos, b.cos);
  EXPECT_EQ(a.sin, b.sin);
}

}  // namespace
}  // namespace tunableop::llm
