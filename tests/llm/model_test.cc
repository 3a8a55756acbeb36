// The device-neutral forward pass (model.cc) seen from a device: which kernel-interface calls
// one prefill and one decode step make, in what order, and that a device's error comes back
// out of prefill/decode as its Status. A recording device wraps the CPU device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "llm/cpu/cpu_device.h"
#include "llm/generate.h"
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
  Status gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out) override {
    return note("gather_rows", [&] { return inner_->gather_rows(x, row_bytes, rows, count, out); });
  }
  Status argmax(const void* logits, int64_t rows, int32_t* out) override {
    return note("argmax", [&] { return inner_->argmax(logits, rows, out); });
  }
  Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                         bool slot_table) override {
    return note("run_decode_step", [&] { return inner_->run_decode_step(batch, linear, step, slot_table); });
  }
  Status add_bias(void* y, const void* bias, int64_t rows, int64_t width) override {
    return note("add_bias", [&] { return inner_->add_bias(y, bias, rows, width); });
  }
  Status qk_norm(void* qkv, int64_t rows, const void* q_norm, const void* k_norm) override {
    return note("qk_norm", [&] { return inner_->qk_norm(qkv, rows, q_norm, k_norm); });
  }
  Status add_normed_residual(float* x, const void* y, const void* w, int64_t rows) override {
    return note("add_normed_residual", [&] { return inner_->add_normed_residual(x, y, w, rows); });
  }
  Status softcap(void* x, int64_t rows, int64_t width, float cap) override {
    return note("softcap", [&] { return inner_->softcap(x, rows, width, cap); });
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

Recorded make_recorded(const ModelConfig& c, const std::string& fail_at = "", int fail_count = 0,
                       bool outputs_only = true) {
  Recorded r;
  r.ctx = std::make_unique<Context>(Device::cpu(), Config::defaults_only());
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 5));
  EngineOptions o = testing::options(2, 32, 8);
  o.prefill_outputs_only = outputs_only;
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

// The layer list as the device sees it, through project()'s default composition: the same
// calls in prefill and decode, each projection's rmsnorm before it and its residual add / gated
// activation / argmax after it, attention one call per layer, the tensor-parallel hook after
// each row-parallel projection (o and down).
// A prefill gathers each sequence's last row of qkv and of the residual stream around the last
// layer's attention (outputs_only), or of the residual stream before the lm_head when every row
// runs every layer.
// The families' calls (config.h) sit in the same list: the qkv biases and head norms between
// the qkv projection and rope_kv, the post-norms as the residual adds of o and down, the
// softcap after the argmax.
std::vector<std::string> expected_pass(int64_t layers, bool prefill, bool outputs_only = true,
                                       const ModelConfig& family = ModelConfig{}) {
  const char* residual = family.post_norms ? "add_normed_residual" : "add_residual";
  std::vector<std::string> v = {"embedding"};
  for (int64_t l = 0; l < layers; ++l) {
    const bool tail = prefill && outputs_only && l + 1 == layers;
    v.push_back("rmsnorm");
    if (family.qkv_bias) v.push_back("add_bias");
    if (family.qk_norm) v.push_back("qk_norm");
    v.push_back("rope_kv");
    if (tail) v.push_back("gather_rows");
    v.push_back("attention");
    if (tail) v.push_back("gather_rows");
    for (const char* op : {"after_row_parallel_linear", residual, "rmsnorm", "gated_activation",
                           "after_row_parallel_linear", residual}) {
      v.push_back(op);
    }
  }
  if (prefill && !outputs_only) v.push_back("gather_rows");
  for (const char* op : {"rmsnorm", "argmax"}) v.push_back(op);
  if (family.final_logit_softcapping > 0) v.push_back("softcap");
  return v;
}

TEST(LlmModel, FamilyCallsSitInTheLayerList) {
  for (const ModelConfig& c : {testing::small_qwen2(), testing::small_qwen3(), testing::small_gemma2()}) {
    SCOPED_TRACE(architecture_name(c.arch));
    Recorded r = make_recorded(c);
    ASSERT_TRUE(r.engine);
    std::vector<int32_t> next;
    ASSERT_TRUE(r.engine->prefill({{1, 2, 3}, {4, 5}}, &next).is_ok());
    EXPECT_EQ(r.device->calls, expected_pass(c.num_layers, true, true, c));
    r.device->calls.clear();
    ASSERT_TRUE(r.engine->decode(next, &next).is_ok());
    std::vector<std::string> want = {"run_decode_step"};
    for (const std::string& op : expected_pass(c.num_layers, false, true, c)) want.push_back(op);
    EXPECT_EQ(r.device->calls, want);
  }
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

  Recorded all = make_recorded(c, "", 0, false);
  ASSERT_TRUE(all.engine);
  ASSERT_TRUE(all.engine->prefill({{1, 2, 3}, {4, 5}}, &next).is_ok());
  EXPECT_EQ(all.device->calls, expected_pass(c.num_layers, true, false));
}

// The last layer's MLP on the output rows alone computes what it computes on every row: the
// same tokens, the same logits to fp32 rounding (a GEMM of 2 rows may sum in another order
// than one of 16), with ragged prompts (the last rows at different offsets) and after decode.
TEST(LlmModel, LastLayerOnTheOutputRowsEqualsEveryRow) {
  for (const ModelConfig& c : {testing::small_llama(), testing::small_gemma()}) {
    Recorded pruned = make_recorded(c, "", 0, true), all = make_recorded(c, "", 0, false);
    ASSERT_TRUE(pruned.engine && all.engine);
    const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {12, 13, 14}};
    std::vector<int32_t> a, b;
    ASSERT_TRUE(pruned.engine->prefill(prompts, &a).is_ok());
    ASSERT_TRUE(all.engine->prefill(prompts, &b).is_ok());
    for (int step = 0; step < 3; ++step) {
      ASSERT_EQ(a, b) << int(c.arch) << " step " << step;
      std::vector<float> la, lb;
      ASSERT_TRUE(pruned.engine->last_logits(&la).is_ok());
      ASSERT_TRUE(all.engine->last_logits(&lb).is_ok());
      ASSERT_EQ(la.size(), lb.size());
      double num = 0, den = 0;
      for (size_t i = 0; i < la.size(); ++i) num += (la[i] - lb[i]) * (la[i] - lb[i]), den += lb[i] * lb[i];
      EXPECT_LT(std::sqrt(num / den), 1e-5) << int(c.arch) << " step " << step;
      ASSERT_TRUE(pruned.engine->decode(a, &a).is_ok());
      ASSERT_TRUE(all.engine->decode(b, &b).is_ok());
    }
  }
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

// A profiled decode step (issue 13's breakdown): one span per kernel in the order they ran, the
// GEMMs marked with the bytes of weights they read; the step itself is an ordinary decode step.
TEST(LlmModel, ProfiledDecodeNamesEachKernel) {
  const ModelConfig c = testing::small_llama();
  Recorded r = make_recorded(c);
  Recorded plain = make_recorded(c);
  std::vector<int32_t> next, want;
  ASSERT_TRUE(r.engine->prefill({{1, 2, 3}}, &next).is_ok());
  ASSERT_TRUE(plain.engine->prefill({{1, 2, 3}}, &want).is_ok());
  auto spans = r.engine->profile_decode(next, &next);
  ASSERT_TRUE(spans.is_ok()) << spans.status().to_string();
  ASSERT_TRUE(plain.engine->decode(want, &want).is_ok());
  EXPECT_EQ(next, want);
  std::vector<std::string> expected = {"embedding"};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (const char* s : {"qkv.norm", "qkv.gemm", "rope_kv", "attention", "o.gemm", "o.residual", "gate_up.norm",
                          "gate_up.gemm", "gate_up.act", "down.gemm", "down.residual"}) {
      expected.push_back(s);
    }
  }
  for (const char* s : {"lm_head.norm", "lm_head.gemm", "lm_head.argmax"}) expected.push_back(s);
  std::vector<std::string> labels;
  int64_t downs = 0, acts = 0, os = 0;  // the last layer's o and MLP run on the 2 output rows
  for (const ProfileSpan& s : *spans) {
    labels.push_back(s.label);
    EXPECT_GE(s.ms, 0) << s.label;
    EXPECT_EQ(s.matmul, s.label.find(".gemm") != std::string::npos) << s.label;
    if (!s.matmul) {
      EXPECT_EQ(s.bytes, 0) << s.label << ": decode spans carry only the weights' bytes";
    }
    if (s.label == "lm_head.gemm") {
      EXPECT_EQ(s.bytes, c.hidden_size * c.vocab_size * 4);
    }
  }
  EXPECT_EQ(labels, expected);
  const StepProfile p = summarize_profile({*spans, *spans});
  EXPECT_EQ(p.steps, 2);
  ASSERT_FALSE(p.rows.empty());
  EXPECT_EQ(p.rows[1].label, "qkv.norm");
  EXPECT_DOUBLE_EQ(p.rows[1].calls, double(c.num_layers));
  EXPECT_NE(format_profile(p, 1.0).find("matmul kernels"), std::string::npos);

  // The benchmark's profile: decode steps up to a position first, then the profiled ones.
  auto q = profile_decode_steps(*r.engine, {{1, 2, 3}}, 4, 2);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->steps, 2);
  EXPECT_EQ(q->position, 3 + 4);  // the prompt, then 4 decoded tokens
  EXPECT_NE(format_profile(*q, 0).find("at position 7"), std::string::npos);
  EXPECT_FALSE(profile_decode_steps(*r.engine, {{1, 2, 3}}, 40, 2).is_ok()) << "past the cache: refused";
}

// A profiled prefill (issue 12's breakdown): one span per kernel in the order they ran, the
// GEMMs and attention with their floating-point work; the prefill itself is an ordinary one
// (same next tokens, same cache: the decode after it agrees).
TEST(LlmModel, ProfiledPrefillNamesEachKernelAndItsWork) {
  const ModelConfig c = testing::small_llama();
  Recorded r = make_recorded(c);
  Recorded plain = make_recorded(c);
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4, 5}, {6, 7}};
  std::vector<int32_t> next, want;
  double host_ms = -1;
  auto spans = r.engine->profile_prefill(prompts, &next, &host_ms);
  ASSERT_TRUE(spans.is_ok()) << spans.status().to_string();
  ASSERT_TRUE(plain.engine->prefill(prompts, &want).is_ok());
  EXPECT_EQ(next, want);
  EXPECT_GE(host_ms, 0);
  ASSERT_TRUE(r.engine->decode(next, &next).is_ok());
  ASSERT_TRUE(plain.engine->decode(want, &want).is_ok());
  EXPECT_EQ(next, want) << "the profiled prefill filled the cache as prefill does";

  const int64_t T = 8, rows = 2 * T;  // both prompts padded to 8
  std::vector<std::string> labels;
  int64_t downs = 0, acts = 0, os = 0;  // the last layer's o and MLP run on the 2 output rows
  for (const ProfileSpan& s : *spans) {
    labels.push_back(s.label);
    EXPECT_GE(s.ms, 0) << s.label;
    if (s.label == "qkv.gemm") {
      EXPECT_DOUBLE_EQ(s.flops, 2.0 * double(rows * c.hidden_size * c.qkv_dim()));
    }
    if (s.label == "down.gemm") {  // every row but in the last layer: the 2 output rows
      const int64_t r_down = ++downs == c.num_layers ? 2 : rows;
      EXPECT_DOUBLE_EQ(s.flops, 2.0 * double(r_down * c.intermediate_size * c.hidden_size));
    }
    if (s.label == "lm_head.gemm") {
      EXPECT_DOUBLE_EQ(s.flops, 2.0 * double(2 * c.hidden_size * c.vocab_size));
    }
    if (s.label == "attention") {
      EXPECT_DOUBLE_EQ(s.flops, 4.0 * 2 * double(T * (T + 1) / 2) * double(c.num_heads * c.head_dim));
    }
    if (s.label == "rope_kv" || s.label == "embedding") {
      EXPECT_EQ(s.flops, 0) << s.label;
    }
    // The activation bytes an element-wise kernel moves (fp32 on the CPU), for the GB/s column.
    if (s.label == "gate_up.act") {
      const int64_t r_act = ++acts == c.num_layers ? 2 : rows;
      EXPECT_EQ(s.bytes, r_act * c.intermediate_size * 3 * 4);
    }
    if (s.label == "rope_kv") {
      EXPECT_EQ(s.bytes, 2 * rows * c.qkv_dim() * 4);
    }
    if (s.label == "o.residual") {
      const int64_t r_o = ++os == c.num_layers ? 2 : rows;
      EXPECT_EQ(s.bytes, r_o * c.hidden_size * 12);
    }
    if (s.label == "o.next_norm") {
      EXPECT_EQ(s.bytes, rows * c.hidden_size * 8);
    }
  }
  ASSERT_GE(labels.size(), size_t(4));
  EXPECT_EQ(labels[0], "embedding");
  EXPECT_EQ(labels[1], "qkv.norm");
  EXPECT_NE(std::find(labels.begin(), labels.end(), "o.next_norm"), labels.end()) << "the norm ahead of gate_up";
  // The output rows' qkv are gathered once, before the last layer's attention (on those rows,
  // as a decode step's), the residual rows after it, before the last o projection.
  const auto gather = std::find(labels.begin(), labels.end(), "gather_rows.qkv");
  ASSERT_NE(gather, labels.end());
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "gather_rows.qkv"), 1);
  EXPECT_EQ(std::count(labels.begin(), labels.end(), "gather_rows"), 1);
  EXPECT_EQ(*(gather + 1), "attention.outputs");
  EXPECT_EQ(*(gather + 2), "gather_rows");
  EXPECT_EQ(std::count(gather, labels.end(), "attention"), 0);
  EXPECT_EQ(std::count(gather, labels.end(), "o.gemm"), 1);
  EXPECT_EQ(std::count(gather, labels.end(), "down.gemm"), 1);
  EXPECT_EQ(labels.back(), "lm_head.argmax");

  auto q = profile_prefills(*r.engine, prompts, 2);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(q->steps, 2);
  EXPECT_GE(q->host_ms, 0);
  const std::string table = format_prefill_profile(*q, 5.0);
  for (const char* want_text : {"Prefill breakdown", "qkv.gemm *", "attention", "GEMMs (*)", "TTFT as benchmarked"}) {
    EXPECT_NE(table.find(want_text), std::string::npos) << want_text << "\n" << table;
  }
  EXPECT_NE(prefill_profile_json(*q, 5.0).find("\"ttft_us\":5000"), std::string::npos);
  EXPECT_FALSE(profile_prefills(*r.engine, prompts, 0).is_ok());
}

// project() refuses a projection whose shape does not fit its epilogue (a wrong model, not data).
TEST(LlmModel, ProjectionShapeMustFitItsEpilogue) {
  const ModelConfig c = testing::small_llama();
  auto w = std::make_shared<const ModelWeights>(make_random_weights(c, 5));
  auto dev = make_cpu_device(w, 16);
  Context ctx(Device::cpu(), Config::defaults_only());
  LinearOp linear(tunableop_linear(ctx));
  std::vector<float> x(size_t(c.hidden_size)), y(size_t(c.hidden_size) + 1);
  Projection p;
  p.name = "o";
  p.rows = 1;
  p.in = c.hidden_size;
  p.out = c.hidden_size + 1;  // the residual stream is hidden_size wide
  p.w = w->layers[0].wo.data();
  p.input = x.data();
  p.epilogue = Projection::Epilogue::kAddResidual;
  p.y = y.data();
  p.residual = x.data();
  Status st = dev->project(p, linear);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("project o"), std::string::npos) << st.message();
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
