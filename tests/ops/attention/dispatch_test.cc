// attention() end to end through a CPU context: Default (the math path) when TunableOp is off,
// a problem tuned once into the results file (its op and params signature, a candidate that
// passed the numerics check) and served from it afterwards, offline tuning on random operands
// of paged and ragged problems (their page tables and lengths made valid), and bad operands.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>

#include "ops/attention/dispatch.h"
#include "support/attention_testing.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  Scratch() {
    static std::atomic<int> n{0};
    dir = fs::temp_directory_path() /
          ("tunableop-attn-dispatch-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
};

Config tuning_config(const std::string& file) {
  Config c = Config::defaults_only();
  EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(c.set(Setting::kTuning, true).is_ok());
  EXPECT_TRUE(c.set(Setting::kFilename, file.c_str()).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxTuningDurationMs, int64_t(2)).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxWarmupDurationMs, int64_t(1)).is_ok());
  return c;
}

AttentionParams ragged_paged() {
  AttentionParams p;
  p.dtype = DType::kF32, p.batch = 3, p.q_len = 24, p.kv_len = 24, p.heads = 4, p.kv_heads = 2, p.head_dim = 16;
  p.page_size = 8, p.var_q_len = true, p.var_kv_len = true;
  return p;
}

TEST(AttentionDispatch, DefaultWhenOffTunedOnceThenServed) {
  Scratch s;
  const std::string file = (s.dir / "results.csv").string();
  testing::HostAttention h = testing::make_attention_problem(ragged_paged(), 3);
  for (bool tuned : {false, true, true}) {
    Context ctx(Device::cpu(), tuned ? tuning_config(file) : Config::defaults_only());
    std::fill(h.out.begin(), h.out.end(), uint8_t(0xFF));
    ASSERT_TRUE(attention(ctx, h.p, h.operands()).is_ok());
    EXPECT_TRUE(testing::attention_output_ok(h, h.out));
    auto plan = make_plan(ctx, h.p);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    EXPECT_EQ(plan->solution(),
              tuned ? ctx.results().lookup(attention_op_signature(h.p), attention_params_signature(h.p))->solution
                    : "Default");
  }
  std::ifstream in(results_path_for(file, "0"));
  std::string all((std::istreambuf_iterator<char>(in)), {});
  const std::string line = "AttentionTunableOp_float_causal,b3_q24_k24_h4_kv2_d16_p8_np12_vk_vq,";
  EXPECT_NE(all.find(line), std::string::npos) << all;
  EXPECT_EQ(all.find(line), all.rfind(line)) << "tuned once, then served from the file";
}

TEST(AttentionDispatch, OfflineTuningMakesValidTablesAndLengths) {
  Scratch s;
  Context ctx(Device::cpu(), tuning_config((s.dir / "offline.csv").string()));
  for (AttentionParams p : {ragged_paged(), testing::attention_test_shapes(DType::kF32)[5]}) {
    p.batch = 8;  // more sequences than any one-element default buffer holds
    auto rep = AttentionDispatch::tune(ctx, p, /*retune=*/true, nullptr);
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
    EXPECT_FALSE(rep->winner.solution.empty());
  }
  // Tables the problem lacks are left alone (an empty buffer), whatever the batch.
  AttentionParams plain = ragged_paged();
  plain.page_size = 0, plain.var_q_len = plain.var_kv_len = false;
  plain = plain.with_defaults();
  std::mt19937_64 rng(1);
  int32_t guard[2] = {-7, -7};
  using Def = ops::OpDefinition<AttentionOp>;
  EXPECT_TRUE(Def::fill_random(plain, Def::kKvLens, guard, rng));
  EXPECT_TRUE(Def::fill_random(plain, Def::kTable, guard, rng));
  EXPECT_EQ(guard[0], -7);
  EXPECT_FALSE(Def::fill_random(plain, Def::kQ, guard, rng));  // numbers: the framework fills those
}

TEST(AttentionDispatch, BadOperandsAreErrors) {
  Context ctx(Device::cpu(), Config::defaults_only());
  testing::HostAttention h = testing::make_attention_problem(ragged_paged(), 4);
  AttentionOperands o = h.operands();
  o.block_table = nullptr;
  EXPECT_EQ(attention(ctx, h.p, o).code(), StatusCode::kInvalidArgument);
  o = h.operands();
  o.q_lens = nullptr;
  EXPECT_EQ(attention(ctx, h.p, o).code(), StatusCode::kInvalidArgument);
  AttentionParams bad = h.p;
  bad.kv_heads = 3;
  EXPECT_EQ(attention(ctx, bad, h.operands()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunableop
