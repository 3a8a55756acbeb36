// Every CPU attention candidate against the fp64 reference on the shared shape set (random
// inputs, NaN-poisoned output and cache slots nothing may read), plus argument errors.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/attention/cpu_attention.h"
#include "support/attention_testing.h"

namespace tunableop {
namespace {

using testing::HostAttention;

void check_all_candidates(DType dtype, uint64_t seed) {
  const auto cands = cpu_attention::cpu_attention_candidates();
  ASSERT_GE(cands.size(), 2u);
  for (const AttentionParams& shape : testing::attention_test_shapes(dtype)) {
    HostAttention h = testing::make_attention_problem(shape, seed++);
    for (const auto& c : cands) {
      SCOPED_TRACE(c.name + " " + testing::describe(h.p));
      ASSERT_TRUE(c.supports(h.p).is_ok());
      std::vector<uint8_t> out = h.out;  // poisoned
      AttentionOperands o = h.operands();
      o.out = out.data();
      Status st = c.run(h.p, o);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_TRUE(testing::attention_output_ok(h, out));
    }
  }
}

TEST(CpuAttention, Fp32AllShapes) { check_all_candidates(DType::kF32, 100); }
TEST(CpuAttention, Bf16AllShapes) { check_all_candidates(DType::kBF16, 200); }
TEST(CpuAttention, Fp16AllShapes) { check_all_candidates(DType::kF16, 300); }

TEST(CpuAttention, FusedSplitsKeysForDecodeOnManyThreads) {
  // One work item and 8 threads: the keys are split 8 ways and merged.
  AttentionParams p;
  p.dtype = DType::kF32, p.q_len = 1, p.kv_len = 3000, p.heads = 4, p.kv_heads = 1, p.head_dim = 64;
  HostAttention h = testing::make_attention_problem(p, 7);
  std::vector<uint8_t> out = h.out;
  AttentionOperands o = h.operands();
  o.out = out.data();
  ASSERT_TRUE(cpu_attention::fused_attention(h.p, o, {16, 64, 8}).is_ok());
  EXPECT_TRUE(testing::attention_output_ok(h, out));
}

TEST(CpuAttention, BadArgumentsAreErrorsNotCrashes) {
  AttentionParams p;
  p.dtype = DType::kF32, p.q_len = 4, p.kv_len = 8, p.heads = 4, p.kv_heads = 2, p.head_dim = 64;
  HostAttention h = testing::make_attention_problem(p, 9);
  AttentionOperands o = h.operands();
  AttentionParams bad = h.p;
  bad.kv_heads = 3;
  EXPECT_EQ(cpu_attention::fused_attention(bad, o, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu_attention::math_attention(bad, o).code(), StatusCode::kInvalidArgument);
  AttentionOperands missing = o;
  missing.v = nullptr;
  EXPECT_EQ(cpu_attention::fused_attention(h.p, missing, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu_attention::fused_attention(h.p, o, {0, 64, 1}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunableop
