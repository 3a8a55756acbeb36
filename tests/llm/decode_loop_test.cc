// The device-side decode loop's logic (issue 13), on the CPU engine, whose device runs the same
// Model code with synchronous copies: step N+1 queued before token N is read (Engine::
// decode_ahead / collect_ahead), stop conditions checked one step late with the extra step's
// tokens dropped, cache pages reserved ahead of the steps in flight, tokens identical to the host
// loop, and the benchmark timing both loops side by side. The CUDA engine's version of these
// (graphs, the advance kernel, asynchronous copies) is in cuda_engine_test.cc.
#include <gtest/gtest.h>

#include "llm/engine.h"
#include "llm/generate.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

std::unique_ptr<Engine> make_engine(const ModelConfig& c, Context& ctx, EngineOptions o) {
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 1));
  auto e = make_cpu_engine(w, o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e.value());
}

EngineOptions paged(EngineOptions o, int64_t page_size) {
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = page_size;
  return o;
}

const std::vector<std::vector<int32_t>> kRagged = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {4, 4}, {5, 6, 7, 8, 9, 10, 11}};

// Same tokens and lengths as the host loop: static and paged, one sequence and a ragged batch,
// one and two steps ahead, the loops alternating on one engine.
TEST(DecodeLoop, DeviceLoopEqualsHostLoop) {
  Context ctx(Device::cpu(), Config::defaults_only());
  for (int64_t page : {int64_t(0), int64_t(2)}) {
    const EngineOptions o = testing::options(3, 48, 8);
    auto e = make_engine(testing::small_gemma(), ctx, page ? paged(o, page) : o);
    ASSERT_TRUE(e->decode_ahead_supported());
    for (const auto& prompts : {std::vector<std::vector<int32_t>>{kRagged[0]}, kRagged}) {
      for (int ahead : {1, 2}) {
        SCOPED_TRACE((page ? "paged" : "static") + std::string(", batch ") + std::to_string(prompts.size()) +
                     ", ahead " + std::to_string(ahead));
        auto host = generate(*e, prompts, testing::loop_options(9, DecodeLoop::kHost));
        ASSERT_TRUE(host.is_ok()) << host.status().to_string();
        const auto host_lengths = e->sequence_lengths();
        auto device = generate(*e, prompts, testing::loop_options(9, DecodeLoop::kDevice, -1, ahead));
        ASSERT_TRUE(device.is_ok()) << device.status().to_string();
        EXPECT_EQ(device->tokens, host->tokens);
        EXPECT_EQ(e->sequence_lengths(), host_lengths);  // no step beyond the last one needed
        EXPECT_EQ(device->step_s.size(), 8u);
        for (const auto& t : device->tokens) EXPECT_EQ(t.size(), 9u);
      }
    }
  }
}

// A stop token is seen one step late: the step queued after it runs and its tokens are dropped
// (the sequences end one position longer in the cache than the host loop leaves them); the
// tokens are the host loop's. A sequence that ended keeps being computed while others go on.
TEST(DecodeLoop, StopTokenIsCheckedOneStepLate) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = make_engine(testing::small_llama(), ctx, paged(testing::options(3, 48, 8), 2));
  auto free_run = generate(*e, kRagged, testing::loop_options(12, DecodeLoop::kHost));
  ASSERT_TRUE(free_run.is_ok());
  // Every sequence's 4th token as the stop: each ends at its first occurrence.
  for (size_t which = 0; which < kRagged.size(); ++which) {
    const int32_t stop = free_run->tokens[which][3];
    SCOPED_TRACE("stop " + std::to_string(stop));
    auto host = generate(*e, kRagged, testing::loop_options(12, DecodeLoop::kHost, stop));
    ASSERT_TRUE(host.is_ok());
    const auto host_lengths = e->sequence_lengths();
    for (int ahead : {1, 2}) {
      auto device = generate(*e, kRagged, testing::loop_options(12, DecodeLoop::kDevice, stop, ahead));
      ASSERT_TRUE(device.is_ok()) << device.status().to_string();
      EXPECT_EQ(device->tokens, host->tokens) << "ahead " << ahead;
      size_t longest = 0;
      for (const auto& t : host->tokens) {
        longest = std::max(longest, t.size());
        EXPECT_TRUE(t.size() == 12 || t.back() == stop);
      }
      // The host loop ran longest - 1 steps; the device loop queued up to `ahead` more, never
      // past the 11 a full run needs.
      const int64_t extra = std::min<int64_t>(ahead, 11 - int64_t(longest - 1));
      const auto lengths = e->sequence_lengths();
      for (size_t b = 0; b < kRagged.size(); ++b) EXPECT_EQ(lengths[b], host_lengths[b] + extra) << b;
    }
  }
}

// The engine's side: a step's cache room (a paged cache's pages) is reserved when the step is
// queued, ahead of the tokens before it being read; at most kMaxAhead steps in flight; the
// chain starts from the host's tokens; a prefill drops what is in flight.
TEST(DecodeLoop, PagesAreReservedWhenAStepIsQueued) {
  Context ctx(Device::cpu(), Config::defaults_only());
  const ModelConfig c = testing::small_llama();
  auto e = make_engine(c, ctx, paged(testing::options(1, 48, 4), 2));
  const int64_t per_page = 2 * 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4;
  std::vector<int32_t> next;
  ASSERT_TRUE(e->prefill({{1, 2, 3, 4}}, &next).is_ok());
  EXPECT_EQ(e->kv_cache_stats().in_use, 2 * per_page);
  EXPECT_FALSE(e->decode_ahead(nullptr).is_ok());  // nothing queued left this step's inputs
  // The host loop's tokens, to compare.
  auto host = generate(*e, {{1, 2, 3, 4}}, testing::loop_options(4, DecodeLoop::kHost));
  ASSERT_TRUE(host.is_ok());
  ASSERT_TRUE(e->prefill({{1, 2, 3, 4}}, &next).is_ok());
  ASSERT_TRUE(e->decode_ahead(&next).is_ok());  // position 4: a third page
  EXPECT_EQ(e->kv_cache_stats().in_use, 3 * per_page);
  EXPECT_FALSE(e->decode_ahead(&next).is_ok());   // tokens from the host while a step is in flight
  ASSERT_TRUE(e->decode_ahead(nullptr).is_ok());  // position 5
  ASSERT_TRUE(e->decode_ahead(nullptr).is_ok());  // position 6: a fourth page, before any token is read
  EXPECT_EQ(e->kv_cache_stats().in_use, 4 * per_page);
  EXPECT_FALSE(e->decode_ahead(nullptr).is_ok());  // kMaxAhead in flight
  EXPECT_EQ(e->sequence_lengths(), std::vector<int64_t>{4});
  std::vector<int32_t> got = {next[0]};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(e->collect_ahead(&next).is_ok());
    got.push_back(next[0]);
  }
  EXPECT_EQ(got, host->tokens[0]);
  EXPECT_EQ(e->sequence_lengths(), std::vector<int64_t>{7});
  EXPECT_FALSE(e->collect_ahead(&next).is_ok());  // nothing in flight
  // Two more in flight, then a prefill: dropped, and the new sequence starts clean.
  ASSERT_TRUE(e->decode_ahead(nullptr).is_ok());
  ASSERT_TRUE(e->decode_ahead(nullptr).is_ok());
  ASSERT_TRUE(e->prefill({{1, 2, 3, 4}}, &next).is_ok());
  EXPECT_EQ(e->sequence_lengths(), std::vector<int64_t>{4});
  EXPECT_EQ(e->kv_cache_stats().in_use, 2 * per_page);
  EXPECT_FALSE(e->collect_ahead(&next).is_ok());
  auto again = generate(*e, {{1, 2, 3, 4}}, testing::loop_options(4, DecodeLoop::kDevice));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->tokens, host->tokens);
}

TEST(DecodeLoop, RejectsBadOptions) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = make_engine(testing::small_llama(), ctx, testing::options(1, 48, 8));
  EXPECT_FALSE(generate(*e, {{1, 2}}, testing::loop_options(4, DecodeLoop::kDevice, -1, 0)).is_ok());
  EXPECT_FALSE(generate(*e, {{1, 2}}, testing::loop_options(4, DecodeLoop::kDevice, -1, Engine::kMaxAhead)).is_ok());
  EXPECT_EQ(resolve_decode_loop(*e, DecodeLoop::kAuto), DecodeLoop::kHost);
  EXPECT_EQ(resolve_decode_loop(*e, DecodeLoop::kDevice), DecodeLoop::kDevice);
}

// --compare-decode-loops: both loops timed in one benchmark, their tokens compared.
TEST(DecodeLoop, BenchmarkComparesTheLoops) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto e = make_engine(testing::small_gemma(), ctx, testing::options(2, 48, 8));
  BenchmarkOptions o{6, 2, 1, {}};
  o.loop = DecodeLoop::kDevice;
  o.compare_loops = true;
  auto r = run_benchmark(*e, {{1, 2, 3}, {4, 5}}, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->decode_loop, "device");
  EXPECT_EQ(r->generated_tokens, 2 * 2 * 6);  // the timed loop's runs only
  ASSERT_TRUE(r->loops.done);
  EXPECT_TRUE(r->loops.identical);
  EXPECT_EQ(r->loops.runs, 2);
  EXPECT_GT(r->loops.host_tpot_ms, 0);
  EXPECT_GT(r->loops.device_tpot_ms, 0);
  EXPECT_NEAR(r->tpot_ms, r->loops.device_tpot_ms, 1e-12);
  EXPECT_NE(format_report(*r).find("Decode loops (same process"), std::string::npos) << format_report(*r);
  EXPECT_NE(report_json(*r).find("\"decode_loops\""), std::string::npos);
  o.compare_loops = false;
  auto plain = run_benchmark(*e, {{1, 2, 3}}, o);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE(plain->loops.done);
}

}  // namespace
}  // namespace tunableop::llm
