// tools/llm_tp.cc: the engine `llm --tp N` runs is the tensor-parallel engine wrapped with the
// rank contexts it keeps alive. The wrapper must hand every call on: the GPU run of issue 30
// (2026-11-28, 4 x H200) found the one-process `--tp` decoding with the host loop because the
// wrapper left decode_ahead_supported() to Engine's default ("no"). Checked here on CPU ranks,
// where the same wrapper and the same Model code run.
#include "llm_tp.h"

#include <gtest/gtest.h>

#include "llm/generate.h"
#include "llm/parallel/tp_engine.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::cli {
namespace {

using llm::DecodeLoop;

// Two CPU ranks of a small Llama-3 (sharing one context, as `llm --device cpu --tp 2` does).
StatusOr<std::unique_ptr<llm::Engine>> cpu_tp_engine(Context& ctx) {
  auto weights = std::make_shared<const llm::ModelWeights>(llm::make_random_weights(llm::testing::small_llama3(), 1));
  return llm::make_cpu_tp_engine(weights, llm::testing::options(2, 48, 8), {&ctx, &ctx});
}

struct Wrapped {
  std::unique_ptr<Context> ctx = std::make_unique<Context>(Device::cpu(), Config::defaults_only());
  std::unique_ptr<llm::Engine> engine;
};

// The same, wrapped as the CLI wraps its CUDA ranks.
Wrapped wrapped_tp_engine() {
  Wrapped w;
  auto tp = cpu_tp_engine(*w.ctx);
  EXPECT_TRUE(tp.is_ok()) << tp.status().to_string();
  if (tp.is_ok()) w.engine = keep_rank_contexts({}, std::move(tp.value()));
  return w;
}

TEST(LlmTpWrapper, DecodesWithTheDeviceLoopAndTheHostLoopsTokens) {
  Wrapped w = wrapped_tp_engine();
  ASSERT_TRUE(w.engine);
  ASSERT_TRUE(w.engine->decode_ahead_supported());
  EXPECT_EQ(llm::resolve_decode_loop(*w.engine, DecodeLoop::kDevice), DecodeLoop::kDevice);
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {7, 8}};
  auto host = llm::generate(*w.engine, prompts, llm::testing::loop_options(7, DecodeLoop::kHost));
  ASSERT_TRUE(host.is_ok()) << host.status().to_string();
  for (int ahead : {1, 2}) {
    auto device = llm::generate(*w.engine, prompts, llm::testing::loop_options(7, DecodeLoop::kDevice, -1, ahead));
    ASSERT_TRUE(device.is_ok()) << device.status().to_string();
    EXPECT_EQ(device->tokens, host->tokens) << "ahead " << ahead;
    EXPECT_EQ(device->step_s.size(), 6u);
  }
  // The benchmark reports the loop it timed.
  llm::BenchmarkOptions bo{6, 1, 0, {}};
  bo.loop = DecodeLoop::kDevice;
  auto r = llm::run_benchmark(*w.engine, prompts, bo);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->decode_loop, "device");
}

// The calls with defaults in Engine answer as the engine inside does.
TEST(LlmTpWrapper, AnswersAsTheEngineInside) {
  Wrapped w = wrapped_tp_engine();
  ASSERT_TRUE(w.engine);
  Context inner_ctx(Device::cpu(), Config::defaults_only());
  auto inner = cpu_tp_engine(inner_ctx);
  ASSERT_TRUE(inner.is_ok());
  llm::Engine& a = *w.engine;
  llm::Engine& b = **inner;
  EXPECT_EQ(a.decode_ahead_supported(), b.decode_ahead_supported());
  EXPECT_EQ(a.decode_buckets(), b.decode_buckets());
  EXPECT_EQ(a.slot_pages(), b.slot_pages());
  EXPECT_EQ(a.weight_bytes(), b.weight_bytes());
  std::vector<int32_t> na, nb;
  auto pa = a.profile_prefill({{1, 2, 3}}, &na);
  auto pb = b.profile_prefill({{1, 2, 3}}, &nb);
  EXPECT_EQ(pa.is_ok(), pb.is_ok());
  if (!pa.is_ok() && !pb.is_ok()) {
    EXPECT_EQ(pa.status().message(), pb.status().message());
  }
  EXPECT_EQ(na, nb);
}

}  // namespace
}  // namespace tunableop::cli
