// A layer's attention as the engine poses it to the Attention op (layer_attention), and the
// decode problem tuned ahead of the first decode step at full length (tune_decode_attention), on
// the CPU: the CUDA device calls the same function before it captures the decode graph.
#include "llm/layer_attention.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

Buffer host(size_t bytes) {
  return Buffer(std::calloc(1, bytes), bytes, [](void* p) { std::free(p); });
}

std::unique_ptr<StaticKvCache> static_cache(const ModelConfig& c, int64_t max_batch, int64_t max_seq) {
  const KvLayout layout{c.num_kv_heads, c.head_dim, max_seq};
  const size_t bytes = StaticKvCache::bytes_needed(layout, max_batch, c.num_layers, 4);
  return std::make_unique<StaticKvCache>(layout, max_batch, 4, host(bytes), host(bytes));
}

// Decode: one query per sequence against the whole cache, each sequence's length read from
// Pass::seq_lens, so every step of a run is the same problem (one tuning, one captured graph).
TEST(LayerAttention, DecodeIsOneProblemAgainstTheWholeCache) {
  const ModelConfig c = testing::small_llama();
  auto cache = static_cache(c, 3, 40);
  Pass p;
  p.phase = Phase::kDecode;
  p.batch = 2;
  p.tokens = 1;
  int32_t lens[2] = {5, 9};
  p.seq_lens = lens;
  char qkv[8], out[8];
  auto a = layer_attention(c, DType::kF32, p, 1, qkv, *cache, out);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->params.batch, 2);
  EXPECT_EQ(a->params.q_len, 1);
  EXPECT_EQ(a->params.kv_len, 40);
  EXPECT_EQ(a->params.max_seq, 40);
  EXPECT_TRUE(a->params.var_kv_len);
  EXPECT_FALSE(a->params.var_q_len);
  EXPECT_EQ(a->params.heads, c.num_heads);
  EXPECT_EQ(a->params.kv_heads, c.num_kv_heads);
  EXPECT_EQ(a->params.q_row_stride, c.qkv_dim());
  EXPECT_EQ(a->params.o_row_stride, c.q_dim());
  EXPECT_EQ(a->operands.kv_lens, lens);
  EXPECT_EQ(a->operands.q, qkv);
  EXPECT_EQ(a->operands.out, out);
  EXPECT_EQ(a->operands.k, cache->k(1));
  EXPECT_EQ(a->operands.v, cache->v(1));
  EXPECT_TRUE(a->params.with_defaults().validate().is_ok());
}

AttentionParams decode_problem() {
  const ModelConfig c = testing::small_llama();
  AttentionParams p;
  p.dtype = DType::kF32;
  p.batch = 2;
  p.q_len = 1;
  p.kv_len = p.max_seq = 40;
  p.heads = c.num_heads;
  p.kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.q_row_stride = c.qkv_dim();
  p.o_row_stride = c.q_dim();
  p.var_kv_len = true;
  return p;
}

TEST(TuneDecodeAttention, TunableOpOffIsDefaultAndStoresNothing) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto name = tune_decode_attention(ctx, decode_problem(), nullptr);
  ASSERT_TRUE(name.is_ok()) << name.status().to_string();
  EXPECT_EQ(*name, "Default");
  EXPECT_EQ(ctx.results().size(), 0u);
}

// A miss is tuned once on random operands (every sequence at full length) and recorded, so the
// engine's first decode call finds it; a second call and a context with tuning off reuse it.
TEST(TuneDecodeAttention, TunesAMissOnceAndReusesIt) {
  ScratchDir dir("decode_attention");
  const std::string file = dir.path() + "/results.csv";
  const AttentionParams p = decode_problem().with_defaults();
  const std::string op = attention_op_signature(p), sig = attention_params_signature(p);
  std::string first;
  {
    Context ctx(Device::cpu(), testing::quick_tuning_config(file));
    auto name = tune_decode_attention(ctx, p, nullptr);
    ASSERT_TRUE(name.is_ok()) << name.status().to_string();
    first = *name;
    auto hit = ctx.results().lookup(op, sig);
    ASSERT_TRUE(hit.has_value()) << op << "," << sig;
    EXPECT_EQ(hit->solution, first);
    const size_t stored = ctx.results().size();
    auto again = tune_decode_attention(ctx, p, nullptr);
    ASSERT_TRUE(again.is_ok());
    EXPECT_EQ(*again, first);
    EXPECT_EQ(ctx.results().size(), stored);
  }
  Context reader(Device::cpu(), testing::quick_tuning_config(file, false));
  ASSERT_TRUE(reader.load_results().is_ok());
  auto name = tune_decode_attention(reader, p, nullptr);
  ASSERT_TRUE(name.is_ok()) << name.status().to_string();
  EXPECT_EQ(*name, first);
}

TEST(TuneDecodeAttention, BadProblemNamesTheField) {
  Context ctx(Device::cpu(), Config::defaults_only());
  AttentionParams p = decode_problem();
  p.kv_heads = 3;  // does not divide heads
  auto name = tune_decode_attention(ctx, p, nullptr);
  ASSERT_FALSE(name.is_ok());
  EXPECT_NE(name.status().message().find("kv_heads"), std::string::npos) << name.status().to_string();
}

}  // namespace
}  // namespace tunableop::llm
