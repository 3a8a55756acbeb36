// How a model splits over tensor-parallel ranks: heads, kv heads (split, or copied for MQA),
// uneven MLP and vocabulary splits; models that cannot split are refused with the reason; the
// ranks' host shards put back together give the full tensors.
#include <gtest/gtest.h>

#include "llm/llm_test_util.h"
#include "llm/parallel/tp_layout.h"
#include "llm/random_model.h"

namespace tunableop::llm {
namespace {

TEST(TensorParallelLayout, SplitsHeadsKvHeadsMlpAndVocabulary) {
  ModelConfig c = testing::small_llama();  // 4 heads / 2 kv heads, I 45, V 97
  auto l = TensorParallelLayout::make(c, 2);
  ASSERT_TRUE(l.is_ok()) << l.status().to_string();
  const TensorParallelShard &a = l->shard(0), &b = l->shard(1);
  EXPECT_EQ(a.q_head0, 0);
  EXPECT_EQ(b.q_head0, 2);
  EXPECT_EQ(a.q_heads, 2);
  EXPECT_EQ(a.kv_head0, 0);
  EXPECT_EQ(b.kv_head0, 1);
  EXPECT_EQ(a.kv_heads, 1);
  EXPECT_EQ(a.inter + b.inter, 45);
  EXPECT_EQ(b.inter0, a.inter);
  EXPECT_EQ(a.vocab + b.vocab, 97);
  EXPECT_EQ(b.vocab0, a.vocab);
  ModelConfig local = l->local_config(1);
  EXPECT_EQ(local.num_heads, 2);
  EXPECT_EQ(local.num_kv_heads, 1);
  EXPECT_EQ(local.intermediate_size, b.inter);
  EXPECT_EQ(local.hidden_size, c.hidden_size);
  EXPECT_EQ(local.vocab_size, c.vocab_size);
  EXPECT_FALSE(local.tie_word_embeddings);
  // Four ranks: one query head each, the two heads of a group sharing a copy of its kv head.
  auto four = TensorParallelLayout::make(c, 4);
  ASSERT_TRUE(four.is_ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(four->shard(r).kv_heads, 1);
    EXPECT_EQ(four->shard(r).kv_head0, r / 2) << r;
  }
}

TEST(TensorParallelLayout, MqaCopiesTheKvHead) {
  ModelConfig c = testing::small_gemma();  // 3 heads / 1 kv head
  c.num_heads = 4;
  auto l = TensorParallelLayout::make(c, 2);
  ASSERT_TRUE(l.is_ok());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(l->shard(r).kv_head0, 0);
    EXPECT_EQ(l->shard(r).kv_heads, 1);
  }
}

TEST(TensorParallelLayout, RefusesModelsThatDoNotSplitWithTheReason) {
  ModelConfig c = testing::small_llama();
  auto three = TensorParallelLayout::make(c, 3);
  ASSERT_FALSE(three.is_ok());
  EXPECT_NE(three.status().message().find("4 attention heads do not split evenly"), std::string::npos);
  c.num_heads = 12;
  c.num_kv_heads = 3;  // groups of 4; 6 heads per rank straddle them
  auto two = TensorParallelLayout::make(c, 2);
  ASSERT_FALSE(two.is_ok());
  EXPECT_NE(two.status().message().find("straddle"), std::string::npos) << two.status().message();
}

TEST(TensorParallelLayout, ShardsPutTogetherGiveTheFullTensors) {
  ModelConfig c = testing::small_llama();
  const ModelWeights full = make_random_weights(c, 5);
  auto l = TensorParallelLayout::make(c, 2);
  ASSERT_TRUE(l.is_ok());
  const ModelWeights s0 = shard_weights(full, *l, 0), s1 = shard_weights(full, *l, 1);
  const int64_t H = c.hidden_size, hd = c.head_dim, I = c.intermediate_size;
  // lm_head: rank 0's rows then rank 1's are the full lm_head.
  std::vector<float> head = s0.lm_head;
  head.insert(head.end(), s1.lm_head.begin(), s1.lm_head.end());
  EXPECT_EQ(head, full.lm_head);
  const LayerWeights &f = full.layers[1], &a = s0.layers[1], &b = s1.layers[1];
  // wqkv: rank 1's q rows are full rows [2 hd, 4 hd); its k rows are the second kv head's.
  EXPECT_EQ(int64_t(b.wqkv.size()), (2 * hd + 2 * hd) * H);
  EXPECT_EQ(std::vector<float>(b.wqkv.begin(), b.wqkv.begin() + 2 * hd * H),
            std::vector<float>(f.wqkv.begin() + 2 * hd * H, f.wqkv.begin() + 4 * hd * H));
  const int64_t k1 = c.q_dim() + hd;  // full row of kv head 1's first k row
  EXPECT_EQ(std::vector<float>(b.wqkv.begin() + 2 * hd * H, b.wqkv.begin() + 3 * hd * H),
            std::vector<float>(f.wqkv.begin() + k1 * H, f.wqkv.begin() + (k1 + hd) * H));
  // down: each row of the full matrix is rank 0's columns then rank 1's.
  const int64_t i0 = l->shard(0).inter;
  for (int64_t row = 0; row < H; ++row) {
    for (int64_t col = 0; col < I; ++col) {
      const float got = col < i0 ? a.w_down[size_t(row * i0 + col)] : b.w_down[size_t(row * (I - i0) + col - i0)];
      ASSERT_EQ(got, f.w_down[size_t(row * I + col)]) << row << "," << col;
    }
  }
  // gate_up: rank 1 holds gate rows [i0, I) then up rows [I + i0, 2 I).
  EXPECT_EQ(std::vector<float>(b.w_gate_up.begin(), b.w_gate_up.begin() + (I - i0) * H),
            std::vector<float>(f.w_gate_up.begin() + i0 * H, f.w_gate_up.begin() + I * H));
  EXPECT_EQ(std::vector<float>(b.w_gate_up.begin() + (I - i0) * H, b.w_gate_up.end()),
            std::vector<float>(f.w_gate_up.begin() + (I + i0) * H, f.w_gate_up.end()));
  EXPECT_EQ(a.attn_norm, f.attn_norm);
  EXPECT_EQ(s0.embed, full.embed);
}

}  // namespace
}  // namespace tunableop::llm
