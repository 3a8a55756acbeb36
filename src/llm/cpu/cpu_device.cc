// The CPU device of the forward pass: fp32 throughout, kernels in cpu/kernels.cc, GEMMs through
// the model's LinearOp (tunableop on a CPU context).
//
// Why fp32 weights on the CPU: checkpoints may store bf16/f16, but the CPU GEMM candidates are
// guaranteed for fp32, activations need fp32 anyway, and the Hugging Face reference runs in
// fp32; the weights are widened once at load (exactly: bf16/f16 -> fp32 is lossless).
#include "llm/cpu/cpu_device.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "llm/attention_gemms.h"
#include "llm/cpu/family_kernels.h"
#include "llm/cpu/kernels.h"
#include "llm/cpu/paged_kv.h"
#include "llm/engine_dtype.h"
#include "llm/engine_limits.h"
#include "llm/layer_attention.h"
#include "llm/model.h"
#include "tunableop/status_boundary.h"

namespace tunableop::llm {
namespace {

// Zeroed, 64-byte aligned host memory.
StatusOr<Buffer> host_alloc(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return Status::device_error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return Buffer(p, bytes, [](void* q) { std::free(q); });
}

class CpuKernels final : public DeviceKernels {
 public:
  explicit CpuKernels(std::shared_ptr<const ModelWeights> w, int64_t max_seq)
      : DeviceKernels(w->config), w_(std::move(w)) {
    const ModelConfig& c = config();
    rope_ = make_rope_table(c, max_seq);
    // The weights are used in place.
    view_.embed = w_->embed.data();
    view_.final_norm = w_->final_norm.data();
    view_.lm_head = w_->lm_head_data();
    auto opt = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };  // family tensors
    for (const LayerWeights& l : w_->layers) {
      DeviceWeights::Layer v{l.attn_norm.data(), l.wqkv.data(),      l.wo.data(),
                             l.mlp_norm.data(),  l.w_gate_up.data(), l.w_down.data()};
      v.qkv_bias = opt(l.qkv_bias), v.q_norm = opt(l.q_norm), v.k_norm = opt(l.k_norm);
      v.post_attn_norm = opt(l.post_attn_norm), v.post_mlp_norm = opt(l.post_mlp_norm);
      view_.layers.push_back(v);
    }
    view_.bytes = w_->bytes();
  }

  std::string name() const override { return "cpu (fp32)"; }
  DType dtype() const override { return DType::kF32; }
  const DeviceWeights& weights() const override { return view_; }

  StatusOr<Buffer> alloc(size_t bytes) override { return host_alloc(bytes); }
  StatusOr<Buffer> alloc_host(size_t bytes) override { return host_alloc(bytes); }
  Status upload(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status download(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }

  Status embedding(const Pass& p, float scale, float* x) override {
    cpu::embedding(p.ids, p.rows(), f(view_.embed), config().hidden_size, scale, x);
    return Status::ok();
  }
  Status rmsnorm(const float* x, const void* w, int64_t rows, void* out) override {
    const ModelConfig& c = config();
    cpu::rmsnorm(x, f(w), rows, c.hidden_size, float(c.rms_norm_eps), c.norm_adds_one(), f(out));
    return Status::ok();
  }
  Status add_residual(float* x, const void* y, int64_t rows) override {
    cpu::add_inplace(x, f(y), rows * config().hidden_size);
    return Status::ok();
  }
  Status rope_kv(const Pass& p, int64_t layer, void* qkv, KvCache& cache) override {
    const ModelConfig& c = config();
    cpu::rope(f(qkv), p.rows(), c.qkv_dim(), c.num_heads + c.num_kv_heads, c.head_dim, p.positions, rope_);
    if (cache.kind() == KvCacheKind::kPaged) {
      const auto& pc = static_cast<const PagedKvCache&>(cache);
      cpu::store_kv_paged(f(qkv), p.rows(), c.qkv_dim(), c.q_dim(), p.seqs, p.positions, p.seq_lens, pc, layer,
                          p.block_table ? p.block_table : pc.block_table());  // host memory on the CPU
      return Status::ok();
    }
    auto sc = as_static(cache, "the CPU rope_kv");
    if (!sc.is_ok()) return sc.status();
    cpu::store_kv(f(qkv), p.rows(), c.qkv_dim(), c.q_dim(), p.seqs, p.positions, (*sc)->layout(), f((*sc)->k(layer)),
                  f((*sc)->v(layer)));
    return Status::ok();
  }
  Status attention(const Pass& p, int64_t layer, const void* qkv, KvCache& cache, LinearOp& linear,
                   void* out) override {
    // The attention op (fused blocked kernel or the math path) on either cache.
    if (linear.has_attention()) {
      auto a = layer_attention(config(), DType::kF32, p, layer, qkv, cache, out);
      if (!a.is_ok()) return a.status();
      return linear.attention(p.phase, a->params, a->operands);
    }
    // Without one (tests that give no context): GEMMs and a plain loop over a static cache.
    auto sc = as_static(cache, "the CPU attention without an attention function");
    if (!sc.is_ok()) return sc.status();
    if (p.phase == Phase::kPrefill && linear.has_gemm())
      return prefill_attention(p, layer, f(qkv), **sc, linear, f(out));
    cpu::attention(f(qkv), p.rows(), config().qkv_dim(), config().num_heads, p.seqs, p.positions, (*sc)->layout(),
                   f((*sc)->k(layer)), f((*sc)->v(layer)), score_rule(layer), f(out));
    return Status::ok();
  }
  Status add_bias(void* y, const void* bias, int64_t rows, int64_t width) override {
    cpu::add_bias(f(y), f(bias), rows, width);
    return Status::ok();
  }
  Status qk_norm(void* qkv, int64_t rows, const void* q_norm, const void* k_norm) override {
    const ModelConfig& c = config();
    const float eps = float(c.rms_norm_eps);
    cpu::head_rmsnorm(f(qkv), rows, c.qkv_dim(), 0, c.num_heads, c.head_dim, f(q_norm), eps);
    cpu::head_rmsnorm(f(qkv), rows, c.qkv_dim(), c.num_heads, c.num_kv_heads, c.head_dim, f(k_norm), eps);
    return Status::ok();
  }
  Status add_normed_residual(float* x, const void* y, const void* w, int64_t rows) override {
    const ModelConfig& c = config();
    grow(normed_, size_t(rows * c.hidden_size));
    cpu::rmsnorm(f(y), f(w), rows, c.hidden_size, float(c.rms_norm_eps), c.norm_adds_one(), normed_.data());
    cpu::add_inplace(x, normed_.data(), rows * c.hidden_size);
    return Status::ok();
  }
  Status softcap(void* x, int64_t rows, int64_t width, float cap) override {
    cpu::softcap(f(x), rows * width, cap);
    return Status::ok();
  }
  Status gated_activation(const void* gate_up, int64_t rows, void* out) override {
    cpu::gated_activation(f(gate_up), rows, config().intermediate_size, config().activation, f(out));
    return Status::ok();
  }
  Status gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out) override {
    cpu::gather_rows(x, row_bytes, rows, count, out);
    return Status::ok();
  }
  Status argmax(const void* logits, int64_t rows, int32_t* out) override {
    cpu::argmax_rows(f(logits), rows, config().vocab_size, out);
    return Status::ok();
  }
  // 2 x 512 MiB: past the last-level cache of the machines this runs on, so it is the DRAM rate
  // that a decode step of a model larger than the cache sees.
  StatusOr<double> copy_bandwidth_gbps() override {
    const double gbps = cpu::copy_bandwidth_gbps(size_t(512) << 20);
    if (gbps <= 0) return Status::device_error("cannot allocate 1 GiB to measure the copy bandwidth");
    return gbps;
  }

 private:
  static float* f(void* p) { return static_cast<float*>(p); }
  static const float* f(const void* p) { return static_cast<const float*>(p); }
  static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }

  // Prefill attention through tunableop: two strided-batched GEMMs around a causal softmax
  // (attention_gemms.h), so a long prompt's attention runs in the tuned GEMM kernels instead of
  // a scalar loop (it was ~70% of a 2048-token prefill).
  Status prefill_attention(const Pass& p, int64_t layer, const float* qkv, const StaticKvCache& cache, LinearOp& linear,
                           float* out) {
    const ModelConfig& c = config();
    const int64_t T = p.tokens, group = c.num_heads / c.num_kv_heads;
    const size_t per_head = size_t(p.batch * c.num_heads * T);
    grow(q_perm_, per_head * size_t(c.head_dim));
    grow(o_perm_, per_head * size_t(c.head_dim));
    grow(scores_, per_head * size_t(T));
    const AttentionGemms g = prefill_attention_gemms(c, DType::kF32, p.batch, T, cache.max_seq());
    cpu::permute_q(qkv, p.rows(), c.qkv_dim(), c.num_heads, c.num_kv_heads, c.head_dim, T, q_perm_.data());
    TUNABLEOP_RETURN_IF_ERROR(
        linear.gemm(Phase::kPrefill, g.scores, GemmOperands{cache.k(layer), q_perm_.data(), scores_.data()}));
    cpu::causal_softmax(scores_.data(), p.batch * c.num_kv_heads, T * group, T, group, score_rule(layer));
    TUNABLEOP_RETURN_IF_ERROR(
        linear.gemm(Phase::kPrefill, g.output, GemmOperands{cache.v(layer), scores_.data(), o_perm_.data()}));
    cpu::unpermute_heads(o_perm_.data(), p.batch, c.num_kv_heads, T, group, c.head_dim, out);
    return Status::ok();
  }

  // The layer's attention scores as the attention op's parameters say (layer_attention).
  cpu::ScoreRule score_rule(int64_t layer) const {
    const ModelConfig& c = config();
    const double scale = c.attention_scale();
    return {float(scale > 0 ? scale : 1.0 / std::sqrt(double(c.head_dim))), float(c.attn_logit_softcapping),
            c.layer_window(layer)};
  }

  std::shared_ptr<const ModelWeights> w_;
  DeviceWeights view_;
  RopeTable rope_;
  std::vector<float> q_perm_, o_perm_, scores_;  // prefill attention scratch
  std::vector<float> normed_;                    // add_normed_residual's
};

}  // namespace

std::unique_ptr<DeviceKernels> make_cpu_device(std::shared_ptr<const ModelWeights> weights, int64_t max_seq) {
  return std::make_unique<CpuKernels>(std::move(weights), max_seq);
}

StatusOr<std::unique_ptr<Engine>> make_cpu_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                  LinearOp::Fn linear, LinearOp::GemmFn gemm,
                                                  LinearOp::AttentionFn attention) {
  if (!weights) return Status::invalid_argument("make_cpu_engine: no weights");
  TUNABLEOP_RETURN_IF_ERROR(refuse_fp8(options, "the CPU engine"));
  TUNABLEOP_RETURN_IF_ERROR(prepare_engine_options(weights->config, weights->name, &options));
  // Sizes from the options checked before anything is allocated; what still throws is a Status.
  TUNABLEOP_RETURN_IF_ERROR(check_engine_fits(weights->config, options, sizeof(float), /*host_memory=*/true));
  return status_boundary([name = weights->name] { return "making the CPU engine for " + name; },
                         [&] {
                           return make_engine(make_cpu_device(std::move(weights), options.max_seq), options,
                                              std::move(linear), std::move(gemm), std::move(attention));
                         });
}

}  // namespace tunableop::llm
