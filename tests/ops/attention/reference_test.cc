// The fp64 reference against facts that hold without computing a softmax: uniform scores
// average the visible values, the first causal query sees only key 0, a dominant score picks
// its value row, paged and contiguous caches with the same contents agree, GQA equals MHA
// with duplicated kv heads, and the operand checks refuse bad tables and lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention/reference.h"

namespace tunableop {
namespace {

AttentionParams small(int64_t q, int64_t k, bool causal) {
  AttentionParams p;
  p.dtype = DType::kF32, p.causal = causal, p.batch = 1, p.q_len = q, p.kv_len = k;
  p.heads = 2, p.kv_heads = 1, p.head_dim = 8;
  return p.with_defaults();
}

std::vector<float> ramp(int64_t n, float mul) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(float(i) * mul) * 0.9f;
  return v;
}

TEST(AttentionReference, UniformScoresAverageVisibleValues) {
  const AttentionParams p = small(3, 5, true);
  std::vector<float> q = ramp(p.q_span(), 0.37f), k(size_t(p.kv_span()), 0.25f), v = ramp(p.kv_span(), 0.11f);
  std::vector<float> out(size_t(p.o_span()));
  AttentionOperands o{q.data(), k.data(), v.data(), out.data()};
  const auto ref = attention_reference_f64(p, o);
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t visible = 5 - 3 + i + 1;  // queries are the last 3 of 5 positions
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 8; ++e) {
        double mean = 0;
        for (int64_t j = 0; j < visible; ++j) mean += v[size_t(j * 8 + e)];
        mean /= double(visible);
        EXPECT_NEAR(ref[size_t((i * 2 + h) * 8 + e)], mean, 1e-12) << i << " " << h << " " << e;
      }
  }
}

TEST(AttentionReference, FirstCausalQuerySeesOnlyKeyZero) {
  const AttentionParams p = small(4, 4, true);
  std::vector<float> q = ramp(p.q_span(), 0.3f), k = ramp(p.kv_span(), 0.7f), v = ramp(p.kv_span(), 0.5f);
  std::vector<float> out(size_t(p.o_span()));
  const auto ref = attention_reference_f64(p, AttentionOperands{q.data(), k.data(), v.data(), out.data()});
  for (int64_t e = 0; e < 8; ++e) EXPECT_DOUBLE_EQ(ref[size_t(e)], v[size_t(e)]);
}

// A window of w keys: uniform scores average the w latest visible values (fewer at the start).
TEST(AttentionReference, SlidingWindowAveragesTheLatestKeys) {
  AttentionParams p = small(6, 9, true);
  p.window = 3;
  std::vector<float> q = ramp(p.q_span(), 0.37f), k(size_t(p.kv_span()), 0.25f), v = ramp(p.kv_span(), 0.11f);
  std::vector<float> out(size_t(p.o_span()));
  const auto ref = attention_reference_f64(p, AttentionOperands{q.data(), k.data(), v.data(), out.data()});
  for (int64_t i = 0; i < 6; ++i) {
    const int64_t end = 9 - 6 + i + 1, first = std::max<int64_t>(0, end - 3);  // keys [first, end)
    for (int64_t e = 0; e < 8; ++e) {
      double mean = 0;
      for (int64_t j = first; j < end; ++j) mean += v[size_t(j * 8 + e)];
      mean /= double(end - first);
      EXPECT_NEAR(ref[size_t((i * 2) * 8 + e)], mean, 1e-12) << i << " " << e;
    }
    EXPECT_EQ(attention_first_visible_key(p, 9, 6, i), first);
  }
}

// Softcapping bounds every score: a key that would dominate (score 400) gets at most e^(2 cap)
// times the weight of one scoring -cap.
TEST(AttentionReference, SoftcapBoundsTheScores) {
  AttentionParams p = small(1, 6, false);
  p.scale = 50.0, p.softcap = 1.0;
  std::vector<float> q(size_t(p.q_span()), 1.f), k(size_t(p.kv_span()), 0.f), v(size_t(p.kv_span()), 0.f);
  for (int64_t e = 0; e < 8; ++e) k[size_t(4 * 8 + e)] = 1.f, v[size_t(4 * 8 + e)] = 1.f;
  std::vector<float> out(size_t(p.o_span()));
  const auto ref = attention_reference_f64(p, AttentionOperands{q.data(), k.data(), v.data(), out.data()});
  // Key 4 scores tanh(400) ~ 1, the other five tanh(0) = 0: its weight is e / (e + 5).
  EXPECT_NEAR(ref[0], std::exp(1.0) / (std::exp(1.0) + 5.0), 1e-12);
  EXPECT_DOUBLE_EQ(attention_softcapped(p, 400.0), std::tanh(400.0));
}

TEST(AttentionReference, DominantScorePicksItsValue) {
  AttentionParams p = small(1, 6, false);
  p.scale = 50.0;
  std::vector<float> q(size_t(p.q_span()), 1.f), k(size_t(p.kv_span()), 0.f), v = ramp(p.kv_span(), 0.9f);
  for (int64_t e = 0; e < 8; ++e) k[size_t(4 * 8 + e)] = 1.f;  // key 4 scores 400 more than the rest
  std::vector<float> out(size_t(p.o_span()));
  const auto ref = attention_reference_f64(p, AttentionOperands{q.data(), k.data(), v.data(), out.data()});
  for (int64_t e = 0; e < 8; ++e) EXPECT_NEAR(ref[size_t(e)], v[size_t(4 * 8 + e)], 1e-12);
}

TEST(AttentionReference, PagedEqualsContiguousAndGqaEqualsMha) {
  const AttentionParams c = small(2, 11, true);
  std::vector<float> q = ramp(c.q_span(), 0.21f), k = ramp(c.kv_span(), 0.33f), v = ramp(c.kv_span(), 0.17f);
  std::vector<float> out(size_t(c.o_span()));
  const auto want = attention_reference_f64(c, AttentionOperands{q.data(), k.data(), v.data(), out.data()});

  AttentionParams pg = c;
  pg.max_seq = 0, pg.page_size = 4, pg.num_pages = 5;
  pg = pg.with_defaults();  // 3 pages per sequence
  const int32_t table[3] = {4, 0, 2};
  std::vector<float> kp(size_t(pg.kv_span()), NAN), vp(size_t(pg.kv_span()), NAN);
  for (int64_t j = 0; j < 11; ++j)
    for (int64_t e = 0; e < 8; ++e) {
      const int64_t off = attention_kv_row(pg, table, 0, 0, j) + e;
      kp[size_t(off)] = k[size_t(j * 8 + e)];
      vp[size_t(off)] = v[size_t(j * 8 + e)];
    }
  AttentionOperands po{q.data(), kp.data(), vp.data(), out.data()};
  po.block_table = table;
  ASSERT_TRUE(check_attention_operands(pg, po).is_ok());
  EXPECT_EQ(attention_reference_f64(pg, po), want);

  AttentionParams mha = c;
  mha.kv_heads = 2;
  mha = mha.with_defaults();
  std::vector<float> k2(size_t(mha.kv_span())), v2(size_t(mha.kv_span()));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t x = 0; x < 11 * 8; ++x) {
      k2[size_t(h * 88 + x)] = k[size_t(x)];
      v2[size_t(h * 88 + x)] = v[size_t(x)];
    }
  EXPECT_EQ(attention_reference_f64(mha, AttentionOperands{q.data(), k2.data(), v2.data(), out.data()}), want);
}

// A padded batch of prompts of different lengths: each sequence's real rows equal that prompt
// alone (its own q_len and kv_len), and its padding rows are zeros.
TEST(AttentionReference, PaddedQueriesEqualTheirPromptAlone) {
  AttentionParams p = small(6, 6, true);
  p.batch = 2, p.var_q_len = true, p.var_kv_len = true, p.max_seq = 0;
  p = p.with_defaults();
  std::vector<float> q = ramp(p.q_span(), 0.27f), k = ramp(p.kv_span(), 0.41f), v = ramp(p.kv_span(), 0.19f);
  std::vector<float> out(size_t(p.o_span()));
  const int32_t lens[2] = {6, 4};
  AttentionOperands o{q.data(), k.data(), v.data(), out.data()};
  o.kv_lens = lens, o.q_lens = lens;
  ASSERT_TRUE(check_attention_operands(p, o).is_ok());
  const auto ref = attention_reference_f64(p, o);

  const AttentionParams alone = small(4, 4, true);  // sequence 1 by itself
  const size_t row = size_t(p.heads * p.head_dim);
  std::vector<float> q1(q.begin() + 6 * row, q.begin() + 10 * row);
  std::vector<float> k1(k.begin() + 6 * 8, k.begin() + 10 * 8), v1(v.begin() + 6 * 8, v.begin() + 10 * 8);
  const auto want = attention_reference_f64(alone, AttentionOperands{q1.data(), k1.data(), v1.data(), out.data()});
  for (size_t e = 0; e < 4 * row; ++e) EXPECT_DOUBLE_EQ(ref[6 * row + e], want[e]) << e;
  for (size_t e = 10 * row; e < 12 * row; ++e) EXPECT_EQ(ref[e], 0.0) << "padding row element " << e;

  const int32_t too_many[2] = {6, 7};
  o.q_lens = too_many;
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());  // more queries than rows
  const int32_t short_keys[2] = {6, 3};
  o.q_lens = lens, o.kv_lens = short_keys;
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());  // causal: fewer keys than queries
  o.q_lens = nullptr;
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());  // var_q_len without q_lens
}

TEST(AttentionReference, OperandChecks) {
  AttentionParams p = small(1, 9, true);
  p.max_seq = 0, p.page_size = 4, p.var_kv_len = true;
  p = p.with_defaults();
  std::vector<float> buf(size_t(p.kv_span() + p.q_span() + p.o_span()));
  int32_t table[3] = {0, 1, 2}, lens[1] = {9};
  AttentionOperands o{buf.data(), buf.data(), buf.data(), buf.data()};
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());  // no table, no lengths
  o.block_table = table, o.kv_lens = lens;
  EXPECT_TRUE(check_attention_operands(p, o).is_ok());
  table[2] = 3;  // past the pool
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());
  table[2] = 2, lens[0] = 10;  // longer than kv_len
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());
  lens[0] = 0;
  EXPECT_FALSE(check_attention_operands(p, o).is_ok());
}

}  // namespace
}  // namespace tunableop
