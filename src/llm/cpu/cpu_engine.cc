// The forward pass on the CPU in fp32, written as the list of ops it is (llm.c style).
//
// Why fp32 weights on the CPU: checkpoints may store bf16/f16, but the CPU GEMM candidates are
// guaranteed for fp32, activations need fp32 anyway, and the Hugging Face reference runs in
// fp32; the weights are widened once at load (exactly: bf16/f16 -> fp32 is lossless).
#include <algorithm>
#include <cmath>

#include "core/boundary.h"
#include "llm/cpu/kernels.h"
#include "llm/engine.h"
#include "llm/engine_limits.h"

namespace tunableop::llm {
namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(std::shared_ptr<const ModelWeights> w, EngineOptions o, LinearOp::Fn fn, LinearOp::GemmFn gemm)
      : w_(std::move(w)), c_(w_->config), o_(o), linear_(std::move(fn), std::move(gemm)) {
    kv_.n_kv_heads = c_.num_kv_heads;
    kv_.head_dim = c_.head_dim;
    kv_.max_seq = o_.max_seq;
    // The static cache: allocated once, for max_batch sequences of max_seq positions.
    const size_t cache = size_t(c_.num_layers * o_.max_batch * c_.kv_dim() * o_.max_seq);
    k_cache_.assign(cache, 0.f);
    v_cache_.assign(cache, 0.f);
    rope_ = cpu::make_rope_table(c_.head_dim, c_.rope_theta, o_.max_seq);
    // transformers multiplies by sqrt(hidden) cast to the activations' dtype: fp32 here.
    embed_scale_ = c_.scales_embedding() ? float(std::sqrt(double(c_.hidden_size))) : 1.0f;
    seq_len_.assign(size_t(o_.max_batch), 0);
  }

  const ModelConfig& config() const override { return c_; }
  const EngineOptions& options() const override { return o_; }
  std::string device_name() const override { return "cpu (fp32)"; }
  LinearOp& linear() override { return linear_; }
  std::vector<int64_t> sequence_lengths() const override {
    return std::vector<int64_t>(seq_len_.begin(), seq_len_.begin() + batch_);
  }
  int64_t padded_prompt_length() const override { return padded_; }
  int64_t weight_bytes() const override { return w_->bytes(); }

  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override {
    TUNABLEOP_RETURN_IF_ERROR(check_prompts(c_, o_, prompts));
    batch_ = int64_t(prompts.size());
    int64_t longest = 0;
    for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
    padded_ = round_up(longest, o_.pad_multiple);
    const int64_t T = padded_;
    resize_rows(batch_ * T);
    if (linear_.has_gemm()) {
      const size_t per_head = size_t(batch_ * c_.num_heads * T);
      grow(q_perm_, per_head * size_t(c_.head_dim));
      grow(o_perm_, per_head * size_t(c_.head_dim));
      grow(scores_, per_head * size_t(T));
    }
    last_rows_.resize(size_t(batch_));
    for (int64_t b = 0; b < batch_; ++b) {
      const auto& p = prompts[size_t(b)];
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = b * T + t;
        // Right padding: pad tokens come after the prompt, so causal attention keeps every real
        // token from seeing them, and their cache slots are overwritten by decode before any
        // query can reach them. The padded run therefore equals the unpadded one.
        ids_[size_t(r)] = t < int64_t(p.size()) ? p[size_t(t)] : int32_t(c_.pad_token_id);
        seq_[size_t(r)] = int32_t(b);
        pos_[size_t(r)] = int32_t(t);
      }
      last_rows_[size_t(b)] = b * T + int64_t(p.size()) - 1;
      seq_len_[size_t(b)] = int64_t(p.size());
    }
    return forward(Phase::kPrefill, batch_ * T, T, next);
  }

  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override {
    if (int64_t(tokens.size()) != batch_ || batch_ == 0) {
      return Status::invalid_argument("decode: got " + std::to_string(tokens.size()) + " tokens for a batch of " +
                                      std::to_string(batch_) + " (call prefill first)");
    }
    resize_rows(batch_);
    last_rows_.resize(size_t(batch_));
    for (int64_t b = 0; b < batch_; ++b) {
      if (tokens[size_t(b)] < 0 || tokens[size_t(b)] >= c_.vocab_size) {
        return Status::invalid_argument("decode: token id " + std::to_string(tokens[size_t(b)]) +
                                        " is outside the vocabulary");
      }
      if (seq_len_[size_t(b)] >= o_.max_seq) {
        return Status::invalid_argument("decode: sequence " + std::to_string(b) + " is full (KV cache of " +
                                        std::to_string(o_.max_seq) + " positions)");
      }
      ids_[size_t(b)] = tokens[size_t(b)];
      seq_[size_t(b)] = int32_t(b);
      pos_[size_t(b)] = int32_t(seq_len_[size_t(b)]);
      last_rows_[size_t(b)] = b;
    }
    TUNABLEOP_RETURN_IF_ERROR(forward(Phase::kDecode, batch_, 1, next));
    for (int64_t b = 0; b < batch_; ++b) ++seq_len_[size_t(b)];
    return Status::ok();
  }

  Status last_logits(std::vector<float>* out) override {
    out->assign(logits_.begin(), logits_.begin() + batch_ * c_.vocab_size);
    return Status::ok();
  }

 private:
  static void grow(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  }

  void resize_rows(int64_t rows_in) {
    const size_t rows = size_t(rows_in);
    const size_t H = size_t(c_.hidden_size), I = size_t(c_.intermediate_size), B = size_t(o_.max_batch);
    grow(x_, rows * H);
    grow(xn_, rows * H);
    grow(tmp_, rows * H);
    grow(qkv_, rows * size_t(c_.qkv_dim()));
    grow(attn_, rows * size_t(c_.q_dim()));
    grow(gate_up_, rows * 2 * I);
    grow(act_, rows * I);
    grow(last_, B * H);
    grow(last_norm_, B * H);
    grow(logits_, B * size_t(c_.vocab_size));
    ids_.resize(rows);
    seq_.resize(rows);
    pos_.resize(rows);
  }

  // Prefill attention through tunableop: two strided-batched GEMMs around a causal softmax
  // (prefill_attention_gemms), so a long prompt's attention runs in the tuned GEMM kernels
  // instead of a scalar loop (it was ~70% of a 2048-token prefill).
  Status prefill_attention(int64_t layer, int64_t T) {
    const int64_t group = c_.num_heads / c_.num_kv_heads;
    const int64_t layer_cache = o_.max_batch * c_.kv_dim() * o_.max_seq;
    const AttentionGemms g = prefill_attention_gemms(c_, DType::kF32, batch_, T, o_.max_seq);
    cpu::permute_q(qkv_.data(), batch_ * T, c_.qkv_dim(), c_.num_heads, c_.num_kv_heads, c_.head_dim, T,
                   q_perm_.data());
    TUNABLEOP_RETURN_IF_ERROR(
        linear_.gemm(Phase::kPrefill, g.scores,
                     GemmOperands{k_cache_.data() + layer * layer_cache, q_perm_.data(), scores_.data()}));
    cpu::causal_softmax(scores_.data(), batch_ * c_.num_kv_heads, T * group, T, group);
    TUNABLEOP_RETURN_IF_ERROR(
        linear_.gemm(Phase::kPrefill, g.output,
                     GemmOperands{v_cache_.data() + layer * layer_cache, scores_.data(), o_perm_.data()}));
    cpu::unpermute_heads(o_perm_.data(), batch_, c_.num_kv_heads, T, group, c_.head_dim, attn_.data());
    return Status::ok();
  }

  // One pass over `rows` = batch_ x T tokens (ids_, seq_, pos_ filled); writes the logits of
  // last_rows_ and their argmax.
  Status forward(Phase phase, int64_t rows, int64_t T, std::vector<int32_t>* next) {
    const ModelConfig& c = c_;
    const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), QKV = c.qkv_dim();
    const int64_t layer_cache = o_.max_batch * c.kv_dim() * o_.max_seq;
    const float eps = float(c.rms_norm_eps);
    const bool gemma_norm = c.norm_adds_one();
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    const DType f32 = DType::kF32;

    cpu::embedding(ids_.data(), rows, w_->embed.data(), H, embed_scale_, x_.data());
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const LayerWeights& L = w_->layers[size_t(l)];
      float* kc = k_cache_.data() + l * layer_cache;
      float* vc = v_cache_.data() + l * layer_cache;
      // attention block
      cpu::rmsnorm(x_.data(), L.attn_norm.data(), rows, H, eps, gemma_norm, xn_.data());
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, f32, rows, H, QKV, xn_.data(), L.wqkv.data(), qkv_.data()));
      cpu::rope(qkv_.data(), rows, QKV, c.num_heads + c.num_kv_heads, c.head_dim, pos_.data(), rope_);
      cpu::store_kv(qkv_.data(), rows, QKV, Q, seq_.data(), pos_.data(), kv_, kc, vc);
      if (phase == Phase::kPrefill && linear_.has_gemm()) {
        TUNABLEOP_RETURN_IF_ERROR(prefill_attention(l, T));
      } else {
        cpu::attention(qkv_.data(), rows, QKV, c.num_heads, seq_.data(), pos_.data(), kv_, kc, vc, scale, attn_.data());
      }
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, f32, rows, Q, H, attn_.data(), L.wo.data(), tmp_.data()));
      cpu::add_inplace(x_.data(), tmp_.data(), rows * H);
      // MLP block
      cpu::rmsnorm(x_.data(), L.mlp_norm.data(), rows, H, eps, gemma_norm, xn_.data());
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, f32, rows, H, 2 * I, xn_.data(), L.w_gate_up.data(), gate_up_.data()));
      cpu::gated_activation(gate_up_.data(), rows, I, c.activation, act_.data());
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, f32, rows, I, H, act_.data(), L.w_down.data(), tmp_.data()));
      cpu::add_inplace(x_.data(), tmp_.data(), rows * H);
    }
    // Only the last real position of each sequence needs logits: the lm_head GEMM then has
    // `batch` rows in prefill as in decode, one problem instead of one per prompt length.
    cpu::gather_rows(x_.data(), H, last_rows_.data(), batch_, last_.data());
    cpu::rmsnorm(last_.data(), w_->final_norm.data(), batch_, H, eps, gemma_norm, last_norm_.data());
    TUNABLEOP_RETURN_IF_ERROR(
        linear_(phase, f32, batch_, H, c.vocab_size, last_norm_.data(), w_->lm_head_data(), logits_.data()));
    next->resize(size_t(batch_));
    cpu::argmax_rows(logits_.data(), batch_, c.vocab_size, next->data());
    return Status::ok();
  }

  std::shared_ptr<const ModelWeights> w_;
  const ModelConfig& c_;
  EngineOptions o_;
  LinearOp linear_;
  cpu::KvLayout kv_;
  cpu::RopeTable rope_;
  float embed_scale_ = 1;
  std::vector<float> k_cache_, v_cache_;
  std::vector<float> x_, xn_, tmp_, qkv_, attn_, gate_up_, act_, last_, last_norm_, logits_;
  std::vector<float> q_perm_, o_perm_, scores_;  // prefill attention through GEMMs
  std::vector<int32_t> ids_, seq_, pos_;
  std::vector<int64_t> last_rows_;
  std::vector<int64_t> seq_len_;
  int64_t batch_ = 0;
  int64_t padded_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> make_cpu_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                  LinearOp::Fn linear, LinearOp::GemmFn gemm) {
  if (!weights) return Status::invalid_argument("make_cpu_engine: no weights");
  const ModelConfig& c = weights->config;
  TUNABLEOP_RETURN_IF_ERROR(c.validate(weights->name));
  if (options.max_seq <= 0) options.max_seq = c.max_position_embeddings;
  if (options.max_batch < 1) return Status::invalid_argument("max_batch must be >= 1");
  if (options.pad_multiple < 1) return Status::invalid_argument("pad_multiple must be >= 1");
  if (!linear) return Status::invalid_argument("make_cpu_engine: no linear implementation");
  TUNABLEOP_RETURN_IF_ERROR(check_engine_fits(c, options, sizeof(float), /*host_memory=*/true));
  return status_boundary(
      [name = weights->name] { return "making the CPU engine for " + name; },
      [&]() -> StatusOr<std::unique_ptr<Engine>> {
        return std::unique_ptr<Engine>(new CpuEngine(std::move(weights), options, std::move(linear), std::move(gemm)));
      });
}

}  // namespace tunableop::llm
