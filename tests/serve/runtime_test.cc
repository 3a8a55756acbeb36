// The engine runtime on the CPU engine (a small random model): requests submitted from many
// threads give, each, the greedy tokens the engine gives that prompt alone; sampling with a seed
// is reproducible; cancellation and finishing give pages back; bad requests and a full queue
// are errors; drain finishes what runs and refuses what comes.
#include "serve/runtime.h"

#include <gtest/gtest.h>

#include <thread>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm_test_util.h"

namespace tunableop::serve {
namespace {

std::unique_ptr<llm::Engine> engine(Context& ctx, int64_t max_batch, int64_t pages = 0) {
  const llm::ModelConfig c = llm::testing::small_llama();
  auto w = std::make_shared<const llm::ModelWeights>(llm::make_random_weights(c, 3));
  llm::EngineOptions o = llm::testing::options(max_batch, 48, 8);
  o.kv_cache.kind = llm::KvCacheKind::kPaged;
  o.kv_cache.page_size = 4;
  o.kv_cache.pages = pages;
  auto e =
      llm::make_cpu_engine(w, o, llm::tunableop_linear(ctx), llm::tunableop_gemm(ctx), llm::tunableop_attention(ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  return std::move(e.value());
}

std::unique_ptr<Backend> runtime(Context& ctx, int64_t max_batch, RuntimeOptions o = {}, int64_t pages = 0) {
  o.prefill_tokens = o.prefill_tokens == 2048 ? 24 : o.prefill_tokens;
  auto rt = make_runtime(engine(ctx, max_batch, pages), ctx, o);
  EXPECT_TRUE(rt.is_ok()) << rt.status().to_string();
  return rt.is_ok() ? std::move(rt.value()) : nullptr;
}

std::vector<int32_t> prompt_of(int64_t n, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t((5 + 13 * i + 7 * salt) % 97);
  return p;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int64_t n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  return r;
}

// Everything a channel produces until it finishes.
Channel::Update drain_channel(Channel& ch) {
  Channel::Update all;
  for (;;) {
    Channel::Update u = ch.take(std::chrono::milliseconds(200));
    all.tokens.insert(all.tokens.end(), u.tokens.begin(), u.tokens.end());
    if (u.finished) {
      all.finished = true, all.reason = u.reason, all.error = u.error;
      return all;
    }
  }
}

// Polls the runtime's stats until `ok` holds (they are published after each step), or 5 s.
template <class F>
bool eventually(const Backend& rt, F ok) {
  for (int i = 0; i < 250; ++i) {
    if (ok(rt.stats())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ok(rt.stats());
}

// The greedy tokens of one prompt alone, through the plain engine calls.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int64_t n) {
  static Context ctx(Device::cpu(), Config::defaults_only());  // one engine for every test
  static std::unique_ptr<llm::Engine> e = engine(ctx, 1);
  std::vector<int32_t> next, out;
  EXPECT_TRUE(e->prefill({prompt}, &next).is_ok());
  out.push_back(next[0]);
  while (int64_t(out.size()) < n) {
    EXPECT_TRUE(e->decode({next[0]}, &next).is_ok());
    out.push_back(next[0]);
  }
  return out;
}

TEST(Runtime, ConcurrentRequestsGetTheirAloneTokens) {
  Context ctx(Device::cpu(), Config::defaults_only());
  const int kRequests = 24;
  std::vector<std::vector<int32_t>> prompts, want;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(prompt_of(2 + (i * 7) % 19, i));
    want.push_back(alone(prompts.back(), 5 + i % 4));
  }
  auto rt = runtime(ctx, 6);
  ASSERT_TRUE(rt);
  std::vector<std::vector<int32_t>> got(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      auto ch = rt->submit(greedy(prompts[size_t(i)], int64_t(want[size_t(i)].size())));
      ASSERT_TRUE(ch.is_ok()) << ch.status().to_string();
      Channel::Update u = drain_channel(**ch);
      EXPECT_EQ(u.reason, FinishReason::kLength);
      got[size_t(i)] = u.tokens;
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "request " << i;
  EXPECT_TRUE(eventually(*rt, [](const RuntimeStats& s) { return s.kv_pages_used == 0; }));
  const RuntimeStats s = rt->stats();
  EXPECT_EQ(s.requests_finished, uint64_t(kRequests));
  EXPECT_EQ(s.ttft.count, uint64_t(kRequests));
}

TEST(Runtime, SeededSamplingIsReproducible) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto rt = runtime(ctx, 4);
  auto run = [&](uint64_t seed) {
    GenerationRequest r = greedy(prompt_of(6, 1), 12);
    r.sampling.temperature = 1.0;
    r.sampling.top_p = 0.9;
    r.sampling.seed = seed;
    auto ch = rt->submit(r);
    EXPECT_TRUE(ch.is_ok());
    return drain_channel(**ch).tokens;
  };
  const auto a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // 12 draws from a random model: equal by chance essentially never
}

TEST(Runtime, PreemptionUnderPagePressureStillGivesTheAloneTokens) {
  Context ctx(Device::cpu(), Config::defaults_only());
  // 13 pages of 4 positions (one kept for padding): three 20-token sequences cannot all fit.
  RuntimeOptions o;
  auto rt = runtime(ctx, 3, o, 13);
  ASSERT_TRUE(rt);
  std::vector<std::shared_ptr<Channel>> chans;
  std::vector<std::vector<int32_t>> want;
  for (int i = 0; i < 3; ++i) want.push_back(alone(prompt_of(8, i), 12));
  for (int i = 0; i < 3; ++i) {  // all three in the queue before the first step
    auto ch = rt->submit(greedy(prompt_of(8, i), 12));
    ASSERT_TRUE(ch.is_ok());
    chans.push_back(*ch);
  }
  for (int i = 0; i < 3; ++i) {
    // Recomputed sequences may differ from the alone run only by rounding: the engine is fp32
    // here, so the tokens are the same.
    EXPECT_EQ(drain_channel(*chans[size_t(i)]).tokens, want[size_t(i)]) << "request " << i;
  }
  EXPECT_GE(rt->stats().preemptions, 1u);
  EXPECT_TRUE(eventually(*rt, [](const RuntimeStats& s) { return s.kv_pages_used == 0; }));
}

TEST(Runtime, CancelFreesPagesAndBadRequestsAreErrors) {
  Context ctx(Device::cpu(), Config::defaults_only());
  auto rt = runtime(ctx, 2);
  auto ch = rt->submit(greedy(prompt_of(5, 0), 40));
  ASSERT_TRUE(ch.is_ok());
  (*ch)->take(std::chrono::milliseconds(2000));  // some tokens
  (*ch)->cancel();
  EXPECT_EQ(drain_channel(**ch).reason, FinishReason::kCancelled);
  EXPECT_TRUE(eventually(*rt, [](const RuntimeStats& s) { return s.kv_pages_used == 0 && s.requests_cancelled == 1; }));

  auto bad = [&](GenerationRequest r, const char* what) {
    auto c = rt->submit(std::move(r));
    ASSERT_FALSE(c.is_ok()) << what;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().to_string();
    EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().to_string();
  };
  bad(greedy({}, 3), "empty");
  bad(greedy({1, 97}, 3), "outside the vocabulary");
  bad(greedy(prompt_of(40, 0), 9), "exceeds the model's context of 48");
  GenerationRequest r = greedy(prompt_of(3, 0), 3);
  r.sampling.top_p = 1.5;
  bad(r, "top_p");
}

TEST(Runtime, FullQueueIsRefusedAndDrainRefusesNewWork) {
  Context ctx(Device::cpu(), Config::defaults_only());
  RuntimeOptions o;
  o.max_waiting = 2;
  auto rt = runtime(ctx, 1, o);
  std::vector<std::shared_ptr<Channel>> chans;
  int refused = 0;
  for (int i = 0; i < 12; ++i) {
    auto ch = rt->submit(greedy(prompt_of(4, i), 30));
    if (ch.is_ok())
      chans.push_back(*ch);
    else
      refused += ch.status().code() == StatusCode::kResourceExhausted;
  }
  EXPECT_GT(refused, 0);
  rt->drain(std::chrono::milliseconds(20));  // not enough to finish: the rest is cancelled
  for (auto& c : chans) EXPECT_TRUE(drain_channel(*c).finished);
  auto late = rt->submit(greedy(prompt_of(4, 0), 3));
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tunableop::serve
