// Tensor parallelism over processes on the CPU, each "process" a thread with its own context,
// shard and process-mode communicator, joined by test ProcessGroups as MPI ranks are: rank 0's
// engine carries every call to the others, and the greedy tokens equal one device's and
// transformers' (the Hugging Face fixtures over 2 and 4 ranks, the 70B's head layout in small
// over 8); the slot calls with sampling rows match one device's; errors every rank meets alike
// come back and the next call runs; a rank that fails alone ends the job instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "llm/cpu/cpu_device.h"
#include "llm/generate.h"
#include "llm/llm_test_util.h"
#include "llm/model.h"
#include "llm/parallel/process_tp.h"
#include "llm/parallel/tp_engine.h"
#include "llm/parallel/tp_layout.h"
#include "support/thread_process_group.h"

namespace tunableop::llm {
namespace {

std::string fixtures() {
  const char* src = std::getenv("TUNABLEOP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/llm";
}

// `world` processes: each builds its rank of `spec`; rank 0 runs lead(engine), the others follow
// until rank 0's engine is gone.
void on_processes(int world, const ModelSpec& spec, int64_t layers, const EngineOptions& o,
                  const std::function<void(ProcessTpEngine&)>& lead) {
  tunableop::testing::ThreadGroupHub calls(world), data(world);
  calls.also_break(&data);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Context ctx(Device::cpu(), Config::defaults_only());
      auto e = make_process_tp_engine(spec, 5, layers, o, ctx, calls.group(r), data.group(r));
      ASSERT_TRUE(e.is_ok()) << e.status().to_string();
      EXPECT_EQ((*e)->rank(), r);
      if (r == 0) {
        lead(**e);
      } else {
        Status st = (*e)->follow();
        EXPECT_TRUE(st.is_ok()) << "rank " << r << ": " << st.to_string();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(calls.broken().is_ok()) << calls.broken().to_string();
}

TEST(ProcessTensorParallel, FixturesOverTwoAndFourProcessesMatchOneDeviceAndTransformers) {
  int ran = 0;
  for (const std::string name : {"llama_gqa", "gemma_mqa"}) {
    const std::string dir = fixtures() + "/" + name;
    std::ifstream in(dir + "/reference.json");
    if (!in) continue;
    const auto ref = nlohmann::json::parse(in);
    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref["greedy_ids"].get<std::vector<int32_t>>();
    const EngineOptions o = testing::options(1, 64, 4);
    auto w = load_model(dir);
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    Context ctx(Device::cpu(), Config::defaults_only());
    auto one = make_cpu_engine(std::make_shared<const ModelWeights>(std::move(w.value())), o, tunableop_linear(ctx),
                               tunableop_gemm(ctx), tunableop_attention(ctx));
    ASSERT_TRUE(one.is_ok());
    auto g1 = generate(**one, {prompt}, int64_t(want.size()));
    ASSERT_TRUE(g1.is_ok());
    std::vector<float> l1;
    ASSERT_TRUE((*one)->last_logits(&l1).is_ok());
    for (int world : {2, 4}) {
      on_processes(world, ModelSpec{false, "", dir}, 0, o, [&](ProcessTpEngine& e) {
        EXPECT_NE(e.device_name().find("tensor parallel over " + std::to_string(world) + " processes"),
                  std::string::npos)
            << e.device_name();
        EXPECT_EQ(e.config().num_heads, (*one)->config().num_heads) << "the whole model's config";
        auto g = generate(e, {prompt}, int64_t(want.size()));
        ASSERT_TRUE(g.is_ok()) << g.status().to_string();
        EXPECT_EQ(g->tokens, g1->tokens) << name << " over " << world << " processes";
        EXPECT_EQ(g->tokens[0], want) << name << " over " << world << " processes, against transformers";
        // The device loop: every rank queues its steps ahead, the tokens come one step behind.
        auto ahead = generate(e, {prompt}, testing::loop_options(int64_t(want.size()), DecodeLoop::kDevice, -1, 2));
        ASSERT_TRUE(ahead.is_ok()) << ahead.status().to_string();
        EXPECT_EQ(ahead->tokens, g->tokens) << name << " over " << world << " processes, device loop";
        std::vector<float> l;
        ASSERT_TRUE(e.last_logits(&l).is_ok());
        EXPECT_LT(testing::relative_error(l, l1), 1e-5);
        EXPECT_EQ(e.weight_bytes() > (*one)->weight_bytes(), world > 1) << "embeddings are on every rank";
      });
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no fixtures in " << fixtures();
}

TEST(ProcessTensorParallel, EightProcessesSplitTheSmallGqa8ModelAsTheSeventyBSplits) {
  auto spec = parse_model_spec("builtin:tiny-gqa8");
  ASSERT_TRUE(spec.is_ok());
  auto config = spec_config(*spec, 0);
  ASSERT_TRUE(config.is_ok());
  auto layout = TensorParallelLayout::make(*config, 8);
  ASSERT_TRUE(layout.is_ok());
  for (int r = 0; r < 8; ++r) {  // one kv head and its whole group per rank, as Llama-2-70B at TP=8
    EXPECT_EQ(layout->shard(r).kv_heads, 1);
    EXPECT_EQ(layout->shard(r).q_heads, config->num_heads / config->num_kv_heads);
  }
  const EngineOptions o = testing::options(2, 64, 4);
  Context ctx(Device::cpu(), Config::defaults_only());
  auto one = make_cpu_engine(std::make_shared<const ModelWeights>(make_random_weights(*config, 5)), o,
                             tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  ASSERT_TRUE(one.is_ok());
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 17, 300, 2}, {7, 3}};
  auto g1 = generate(**one, prompts, 12);
  ASSERT_TRUE(g1.is_ok());
  on_processes(8, *spec, 0, o, [&](ProcessTpEngine& e) {
    auto g = generate(e, prompts, 12);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(g->tokens, g1->tokens);
  });
}

TEST(ProcessTensorParallel, SlotCallsWithSamplingMatchOneDevice) {
  EngineOptions o = testing::options(3, 48, 4);
  o.kv_cache.kind = KvCacheKind::kPaged;
  o.kv_cache.page_size = 4;
  const ModelSpec spec{false, "", fixtures() + "/llama_gqa"};
  auto w = load_model(spec.dir);
  if (!w.is_ok()) GTEST_SKIP() << w.status().to_string();
  const std::vector<int32_t> a = {4, 9, 1, 33, 7}, b = {8, 2, 6, 11, 3, 5, 7, 12, 10};
  SamplingRow rows[2];
  rows[1].temperature = 0.8f;
  rows[1].top_k = 20;
  rows[1].seed = 1234;
  // Slot 2 takes a in two chunks, slot 0 takes b (sampled) and joins in the second pass; then
  // decode steps over both; slot 2 leaves and comes back with a new sequence.
  auto script = [&](Engine& e) {
    std::vector<int32_t> out, next;
    auto step = [&](Status st) {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
      out.insert(out.end(), next.begin(), next.end());
    };
    step(e.prefill_slots({{2, a.data(), 3}}, nullptr, &next));
    step(e.prefill_slots({{2, a.data() + 3, 2}, {0, b.data(), int64_t(b.size())}}, rows, &next));
    for (int s = 0; s < 4; ++s) {
      rows[1].counter = uint64_t(s + 1);
      step(e.decode_slots({2, 0}, {next[0], next[1]}, rows, &next));
    }
    e.release_slot(2);
    step(e.prefill_slots({{2, b.data(), 4}}, nullptr, &next));
    EXPECT_EQ(e.slot_length(0), int64_t(b.size()) + 4);
    return out;
  };
  Context ctx(Device::cpu(), Config::defaults_only());
  auto one = make_cpu_engine(std::make_shared<const ModelWeights>(std::move(w.value())), o, tunableop_linear(ctx),
                             tunableop_gemm(ctx), tunableop_attention(ctx));
  ASSERT_TRUE(one.is_ok());
  const std::vector<int32_t> want = script(**one);
  on_processes(2, spec, 0, o, [&](ProcessTpEngine& e) {
    ASSERT_TRUE(e.warm_up_slots({4}).is_ok());
    EXPECT_EQ(script(e), want);
  });
}

TEST(ProcessTensorParallel, ErrorsEveryRankMeetsAlikeComeBackAndTheNextCallRuns) {
  on_processes(2, ModelSpec{false, "", fixtures() + "/llama_gqa"}, 0, testing::options(1, 32, 4),
               [&](ProcessTpEngine& e) {
                 std::vector<int32_t> next;
                 Status st = e.prefill({{1, 2, 1000}}, &next);
                 EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos) << st.to_string();
                 ASSERT_TRUE(e.prefill({{1, 2, 3}}, &next).is_ok());
                 EXPECT_EQ(next.size(), 1u);
                 EXPECT_NE(e.follow().message().find("rank 0 leads"), std::string::npos);
               });
}

// A rank engine that fails its decode alone (a fault of its device), before the step's
// all-reduces: the other ranks wait inside one.
class FailsAlone final : public Engine {
 public:
  FailsAlone(std::unique_ptr<Engine> e, bool fail) : e_(std::move(e)), fail_(fail) {}
  const ModelConfig& config() const override { return e_->config(); }
  const EngineOptions& options() const override { return e_->options(); }
  std::string device_name() const override { return e_->device_name(); }
  Status prefill(const std::vector<std::vector<int32_t>>& p, std::vector<int32_t>* next) override {
    return e_->prefill(p, next);
  }
  Status decode(const std::vector<int32_t>& t, std::vector<int32_t>* next) override {
    if (fail_) return Status::device_error("simulated device fault on this rank");
    return e_->decode(t, next);
  }
  Status last_logits(std::vector<float>* out) override { return e_->last_logits(out); }
  std::vector<int64_t> sequence_lengths() const override { return e_->sequence_lengths(); }
  int64_t padded_prompt_length() const override { return e_->padded_prompt_length(); }
  int64_t weight_bytes() const override { return e_->weight_bytes(); }
  KvCacheStats kv_cache_stats() const override { return e_->kv_cache_stats(); }
  LinearOp& linear() override { return e_->linear(); }
  StatusOr<std::vector<ProfileSpan>> profile_decode(const std::vector<int32_t>& t, std::vector<int32_t>* n) override {
    return e_->profile_decode(t, n);
  }
  StatusOr<double> copy_bandwidth_gbps() override { return e_->copy_bandwidth_gbps(); }
  std::string kernel_choices() const override { return e_->kernel_choices(); }

 private:
  std::unique_ptr<Engine> e_;
  bool fail_;
};

TEST(ProcessTensorParallel, ARankThatFailsAloneEndsTheJobInsteadOfAHang) {
  auto w = load_model(fixtures() + "/llama_gqa");
  if (!w.is_ok()) GTEST_SKIP() << w.status().to_string();
  auto layout = TensorParallelLayout::make(w->config, 2);
  ASSERT_TRUE(layout.is_ok());
  tunableop::testing::ThreadGroupHub calls(2), data(2);
  calls.also_break(&data);
  std::vector<Status> last(2);
  std::vector<double> seconds(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Context ctx(Device::cpu(), Config::defaults_only());
      auto comm = make_process_communicator(ctx, data.group(r));
      ASSERT_TRUE(comm.is_ok());
      const EngineOptions o = testing::options(1, 32, 4);
      auto dev = make_cpu_device(std::make_shared<const ModelWeights>(shard_weights(*w, *layout, r)), o.max_seq);
      dev->set_tensor_parallel(rank_parallelism(*layout, r, **comm, ctx, *dev));
      auto e = make_engine(std::move(dev), o, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
      ASSERT_TRUE(e.is_ok());
      auto tp = wrap_process_tp(std::make_unique<FailsAlone>(std::move(e.value()), r == 1), ctx, calls.group(r), 0.3);
      const auto t0 = std::chrono::steady_clock::now();
      if (r == 0) {
        std::vector<int32_t> next;
        EXPECT_TRUE(tp->prefill({{1, 2, 3}}, &next).is_ok());
        last[0] = tp->decode({next[0]}, &next);
      } else {
        last[1] = tp->follow();
      }
      seconds[size_t(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(calls.broken().is_ok()) << "the job ended";
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(last[size_t(r)].message().find("simulated device fault"), std::string::npos)
        << "rank " << r << ": " << last[size_t(r)].to_string();
    EXPECT_LT(seconds[size_t(r)], 10.0) << "rank " << r;
  }
}

}  // namespace
}  // namespace tunableop::llm
