// The device-neutral forward pass (model.cc) seen from a device: which kernel-interface calls
// one prefill and one decode step make, in what order, and that a device's error comes back
// out of prefill/decode as its Status. A recording device wraps the CPU device.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "llm/cpu/cpu_device.h"
#include "llm/kv_cache.h"
#include "llm/model.h"
#include "llm_test_util.h"
#include "tunableop/context.h"

namespace tunableop::llm {
namespace {

// Forwards every call to the CPU device and records its name; `fail_at` makes the n-th call of
// that name fail instead.
class RecordingDevice final : public DeviceKernels {
 public:
  explicit RecordingDevice(std::unique_ptr<DeviceKernels> inner)
      : DeviceKernels(inner->config()), inner_(std::move(inner)) {}

  std::vector<std::string> calls;
  std::string fail_at;
  int fail_count = 0;

  std::string name() const override { return "recording " + inner_->name(); }
  DType dtype() const override { return inner_->dtype(); }
  const DeviceWeights& weights() const override { return inner_->weights(); }
  StatusOr<Buffer> alloc(size_t bytes) override { return inner_->alloc(bytes); }
  StatusOr<Buffer> alloc_host(size_t bytes) override { return inner_->alloc_host(bytes); }
  Status upload(void* dst, const void* src, size_t bytes) override { return inner_->upload(dst, src, bytes); }
  Status download(void* dst, const void* src, size_t bytes) override { return inner_->download(dst, src, bytes); }

  Status embedding(const Pass& p, float scale, float* x) override {
    return note("embedding", [&] { return inner_->embedding(p, scale, x); });
  }
  Status rmsnorm(const float* x, const void* w, int64_t rows, void* out) override {
    return note("rmsnorm", [&] { return inner_->rmsnorm(x, w, rows, out); });
  }
  Status add_residual(float* x, const void* y, int64_t rows) override {
    return note("add_residual", [&] { return inner_->add_residual(x, y, rows); });
  }
  Status residual_add_rmsnorm(float* x, const void* y, const void* w, int64_t rows, void* out) override {
    return note("residual_add_rmsnorm", [&] { return inner_->residual_add_rmsnorm(x, y, w, rows, out); });
  }
  Status rope_kv(const Pass& p, int64_t layer, void* qkv, KvCache& cache) override {
    return note("rope_kv", [&] { return inner_->rope_kv(p, layer, qkv, cache); });
  }
  Status attention(const Pass& p, int64_t layer, const void* qkv, KvCache& cache, LinearOp& linear,
                   void* out) override {
    return note("attention", [&] { return inner_->attention(p, layer, qkv, cache, linear, out); });
  }
  Status gated_activation(const void* gate_up, int64_t rows, void* out) override {
    return note("gated_activation", [&] { return inner_->gated_activation(gate_up, rows, out); });
  }
  Status after_row_parallel_linear(void* y, int64_t rows, int64_t width) override {
    return note("after_row_parallel_linear", [&] { return inner_->after_row_parallel_linear(y, rows, width); });
  }
  Status gather_rows(const float* x, const int64_t* rows, int64_t count, float* out) override {
    return note("gather_rows", [&] { return inner_->gather_rows(x, rows, count, out); });
  }
  Status argmax(const void* logits, int64_t rows, int32_t* out) override {
    return note("argmax", [&] { return inner_->argmax(logits, rows, out); });
  }
  Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step) override {
    return note("run_decode_step", [&] { return inner_->run_decode_step(batch, linear, step); });
  }

 private:
  template <class F>
  Status note(const std::string& what, F&& call) {
    calls.push_back(what);
    if (what == fail_at && --fail_count == 0) return Status::device_error("injected failure in " + what);
    return call();
  }
  std::unique_ptr<DeviceKernels> inner_;
};

struct Recorded {
  std::unique_ptr<Context> ctx;
  RecordingDevice* device = nullptr;
  std::unique_ptr<Engine> engine;
};

Recorded make_recorded(const ModelConfig& c, const std::string& fail_at = "", int fail_count = 0) {
  Recorded r;
  r.ctx = std::make_unique<Context>(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 5));
  EngineOptions o = testing::options(2, 32, 8);
  EXPECT_TRUE(prepare_engine_options(c, "test", &o).is_ok());
  auto dev = std::make_unique<RecordingDevice>(make_cpu_device(w, o.max_seq));
  dev->fail_at = fail_at;
  dev->fail_count = fail_count;
  r.device = dev.get();
  auto e = make_engine(std::move(dev), o, tunableop_linear(*r.ctx), tunableop_gemm(*r.ctx));
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (e.is_ok()) r.engine = std::move(e.value());
  return r;
}

// The layer list as the device sees it: the same calls in prefill and decode, attention one
// call per layer, the tensor-parallel hook after each row-parallel projection (o and down),
// the residual add joined with the next norm.
std::vector<std::string> expected_pass(int64_t layers, bool prefill) {
  std::vector<std::string> v = {"embedding", "rmsnorm"};
  for (int64_t l = 0; l < layers; ++l) {
    for (const char* op : {"rope_kv", "attention", "after_row_parallel_linear", "residual_add_rmsnorm",
                           "gated_activation", "after_row_parallel_linear"}) {
      v.push_back(op);
    }
    v.push_back(l + 1 < layers ? "residual_add_rmsnorm" : "add_residual");
  }
  if (prefill) v.push_back("gather_rows");
  for (const char* op : {"rmsnorm", "argmax"}) v.push_back(op);
  return v;
}

TEST(LlmModel, DeviceSeesTheLayerList) {
  const ModelConfig c = testing::small_llama();
  Recorded r = make_recorded(c);
  ASSERT_TRUE(r.engine);
  std::vector<float> logits = {1.f};
  ASSERT_TRUE(r.engine->last_logits(&logits).is_ok());  // before any pass: none
  EXPECT_TRUE(logits.empty());
  std::vector<int32_t> next;
  ASSERT_TRUE(r.engine->prefill({{1, 2, 3}, {4, 5}}, &next).is_ok());
  EXPECT_EQ(r.device->calls, expected_pass(c.num_layers, true));
  r.device->calls.clear();
  ASSERT_TRUE(r.engine->decode(next, &next).is_ok());
  std::vector<std::string> want = {"run_decode_step"};
  for (const std::string& op : expected_pass(c.num_layers, false)) want.push_back(op);
  EXPECT_EQ(r.device->calls, want);
  EXPECT_EQ(r.engine->device_name(), "recording cpu (fp32)");
}

// The recording device changes nothing: same tokens and logits as the plain CPU engine.
TEST(LlmModel, WrappedDeviceComputesTheSame) {
  const ModelConfig c = testing::small_gemma();
  Recorded r = make_recorded(c);
  ASSERT_TRUE(r.engine);
  Context ctx(Device::cpu(), Config::defaults_only());
  auto plain = make_cpu_engine(std::make_shared<const ModelWeights>(make_random_weights(c, 5)),
                               testing::options(2, 32, 8), tunableop_linear(ctx), tunableop_gemm(ctx));
  ASSERT_TRUE(plain.is_ok());
  std::vector<int32_t> a, b;
  ASSERT_TRUE(r.engine->prefill({{7, 8, 9, 10}}, &a).is_ok());
  ASSERT_TRUE((*plain)->prefill({{7, 8, 9, 10}}, &b).is_ok());
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(a, b);
    std::vector<float> la, lb;
    ASSERT_TRUE(r.engine->last_logits(&la).is_ok());
    ASSERT_TRUE((*plain)->last_logits(&lb).is_ok());
    ASSERT_EQ(la, lb);
    ASSERT_TRUE(r.engine->decode(a, &a).is_ok());
    ASSERT_TRUE((*plain)->decode(b, &b).is_ok());
  }
}

// A device error ends the pass and comes back as the device's Status.
TEST(LlmModel, DeviceErrorsComeBackFromPrefillAndDecode) {
  const ModelConfig c = testing::small_llama();
  {
    Recorded r = make_recorded(c, "attention", 2);  // layer 1 of the prefill
    std::vector<int32_t> next;
    Status st = r.engine->prefill({{1, 2, 3}}, &next);
    EXPECT_EQ(st.code(), StatusCode::kDeviceError);
    EXPECT_NE(st.message().find("injected failure in attention"), std::string::npos) << st.to_string();
  }
  {
    Recorded r = make_recorded(c, "run_decode_step", 1);
    std::vector<int32_t> next;
    ASSERT_TRUE(r.engine->prefill({{1, 2, 3}}, &next).is_ok());
    const std::vector<int64_t> before = r.engine->sequence_lengths();
    EXPECT_EQ(r.engine->decode(next, &next).code(), StatusCode::kDeviceError);
    EXPECT_EQ(r.engine->sequence_lengths(), before) << "a failed step does not advance the sequences";
  }
}

TEST(LlmModel, StaticCacheReserveNamesWhatDoesNotFit) {
  StaticKvCache cache(KvLayout{2, 8, 16}, 3, 4, Buffer(), Buffer());
  EXPECT_TRUE(cache.reserve(2, 16).is_ok());
  Status st = cache.reserve(0, 17);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("17 positions"), std::string::npos) << st.message();
  EXPECT_FALSE(cache.reserve(3, 1).is_ok());
  EXPECT_EQ(StaticKvCache::bytes_needed(KvLayout{2, 8, 16}, 3, 5, 2), size_t(5 * 3 * 2 * 16 * 8 * 2));
}

TEST(LlmModel, FactoryRejectsBadOptions) {
  ModelConfig c = testing::small_llama();
  EngineOptions o;
  o.max_batch = 0;
  EXPECT_FALSE(prepare_engine_options(c, "test", &o).is_ok());
  o = EngineOptions{};
  EXPECT_TRUE(prepare_engine_options(c, "test", &o).is_ok());
  EXPECT_EQ(o.max_seq, c.max_position_embeddings);
  c.num_kv_heads = 3;  // 4 heads do not split over 3 kv heads
  EXPECT_FALSE(prepare_engine_options(c, "test", &o).is_ok());
  Context ctx(Device::cpu(), Config::defaults_only());
  EXPECT_FALSE(make_engine(nullptr, o, tunableop_linear(ctx), {}).is_ok());
}

}  // namespace
}  // namespace tunableop::llm
