// The forward pass on one GPU: the same list of ops as the CPU engine, GEMMs through
// tunableop::linear / tunableop::gemm on the context's stream, other ops in kernels.cu.
//
// Prefill attention is two strided-batched GEMMs per layer (scores = q k^T per kv head with its
// group of query heads stacked, then probabilities x v) around a causal softmax, so the bulk of
// a long prompt's attention runs on tensor cores and is tuned like every other GEMM. Decode
// attention (one query per sequence) is a kernel that reads each sequence's length on the
// device, which lets the whole decode step be captured once as a CUDA graph and replayed.
#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <utility>

#include "llm/cpu/kernels.h"
#include "llm/cuda/kernels.h"
#include "llm/engine.h"
#include "llm/engine_limits.h"
#include "tunableop/half.h"

namespace tunableop::llm {
namespace {

Status cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::device_error(std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}
#define LLM_CUDA(expr) TUNABLEOP_RETURN_IF_ERROR(cuda_check((expr), #expr))

// One device allocation; grows (never shrinks) on request.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Status ensure(size_t bytes) {
    if (bytes <= bytes_) return Status::ok();
    reset();
    LLM_CUDA(cudaMalloc(&p_, bytes));
    bytes_ = bytes;
    return Status::ok();
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceLayer {
  DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
};

// Activation buffers for `rows` tokens. Prefill and decode have separate sets: decode's never
// move once allocated, which a captured graph relies on.
struct Activations {
  int64_t rows = 0;
  DeviceBuffer x, xn, qkv, attn, tmp, gate_up, act, ids, seqs, pos;
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(const ModelConfig& c, EngineOptions o, Context& ctx)
      : c_(c), o_(o), ctx_(ctx), linear_(tunableop_linear(ctx), tunableop_gemm(ctx)) {}

  ~CudaEngine() override {
    for (auto& [key, g] : graphs_) cudaGraphExecDestroy(g.exec);
    for (void* p : {static_cast<void*>(ids_h_), static_cast<void*>(pos_h_), static_cast<void*>(next_h_)}) {
      if (p) cudaFreeHost(p);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init(const ModelSpec& spec, uint64_t seed) {
    if (o_.dtype != DType::kBF16 && o_.dtype != DType::kF32) {
      return Status::invalid_argument("the CUDA engine computes in bf16 or fp32");
    }
    e_ = o_.dtype == DType::kBF16 ? cuda::Elem::kBF16 : cuda::Elem::kF32;
    esize_ = o_.dtype == DType::kBF16 ? 2 : 4;
    LLM_CUDA(cudaSetDevice(ctx_.device().ordinal));
    LLM_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    LLM_CUDA(cudaGetDeviceProperties(&prop, ctx_.device().ordinal));
    device_desc_ = ctx_.device().to_string() + " (" + dtype_name(o_.dtype) + ", " + prop.name + ")";
    if (o_.max_seq > cuda::decode_attention_max_seq(e_, c_.head_dim)) {
      return Status::invalid_argument("max_seq " + std::to_string(o_.max_seq) +
                                      " exceeds what decode attention keeps in shared memory (" +
                                      std::to_string(cuda::decode_attention_max_seq(e_, c_.head_dim)) + ")");
    }
    TUNABLEOP_RETURN_IF_ERROR(upload_weights(spec, seed));
    const int64_t H = c_.hidden_size, L = c_.num_layers;
    const size_t cache = size_t(o_.max_batch * c_.kv_dim() * o_.max_seq) * esize_;
    k_cache_.resize(size_t(L));
    v_cache_.resize(size_t(L));
    for (int64_t l = 0; l < L; ++l) {
      TUNABLEOP_RETURN_IF_ERROR(k_cache_[size_t(l)].ensure(cache));
      TUNABLEOP_RETURN_IF_ERROR(v_cache_[size_t(l)].ensure(cache));
    }
    cpu::RopeTable rope = cpu::make_rope_table(c_.head_dim, c_.rope_theta, o_.max_seq);
    TUNABLEOP_RETURN_IF_ERROR(upload(rope_cos_, rope.cos.data(), rope.cos.size() * 4));
    TUNABLEOP_RETURN_IF_ERROR(upload(rope_sin_, rope.sin.data(), rope.sin.size() * 4));
    const int64_t B = o_.max_batch;
    TUNABLEOP_RETURN_IF_ERROR(last_x_.ensure(size_t(B * H) * 4));
    TUNABLEOP_RETURN_IF_ERROR(last_norm_.ensure(size_t(B * H) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(logits_.ensure(size_t(B * c_.vocab_size) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(next_d_.ensure(size_t(B) * 4));
    TUNABLEOP_RETURN_IF_ERROR(last_rows_d_.ensure(size_t(B) * 8));
    TUNABLEOP_RETURN_IF_ERROR(ensure_rows(dec_, B));
    LLM_CUDA(cudaMallocHost(&ids_h_, size_t(B) * 4));
    LLM_CUDA(cudaMallocHost(&pos_h_, size_t(B) * 4));
    LLM_CUDA(cudaMallocHost(&next_h_, size_t(B) * 4));
    // Decode row b is sequence b: seqs never change.
    std::vector<int32_t> seqs(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) seqs[size_t(b)] = int32_t(b);
    LLM_CUDA(cudaMemcpy(dec_.seqs.get(), seqs.data(), size_t(B) * 4, cudaMemcpyHostToDevice));
    const double scale = c_.scales_embedding() ? std::sqrt(double(c_.hidden_size)) : 1.0;
    // transformers casts the normaliser to the model dtype before multiplying.
    embed_scale_ = e_ == cuda::Elem::kBF16 ? to_float(to_bf16(float(scale))) : float(scale);
    seq_len_.assign(size_t(B), 0);
    return Status::ok();
  }

  const ModelConfig& config() const override { return c_; }
  const EngineOptions& options() const override { return o_; }
  std::string device_name() const override {
    return device_desc_ + (o_.cuda_graph
                               ? (graph_error_.empty() ? ", CUDA graph decode" : ", no CUDA graph: " + graph_error_)
                               : ", eager decode");
  }
  LinearOp& linear() override { return linear_; }
  std::vector<int64_t> sequence_lengths() const override {
    return std::vector<int64_t>(seq_len_.begin(), seq_len_.begin() + batch_);
  }
  int64_t padded_prompt_length() const override { return padded_; }
  int64_t weight_bytes() const override { return c_.parameter_count() * int64_t(esize_); }

  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override {
    TUNABLEOP_RETURN_IF_ERROR(check_prompts(c_, o_, prompts));
    LLM_CUDA(cudaSetDevice(ctx_.device().ordinal));
    batch_ = int64_t(prompts.size());
    int64_t longest = 0;
    for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
    padded_ = round_up(longest, o_.pad_multiple);
    const int64_t T = padded_, rows = batch_ * T;
    TUNABLEOP_RETURN_IF_ERROR(ensure_rows(pre_, rows));
    const size_t per_head = size_t(batch_ * c_.num_heads * T);
    TUNABLEOP_RETURN_IF_ERROR(q_perm_.ensure(per_head * size_t(c_.head_dim) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(o_perm_.ensure(per_head * size_t(c_.head_dim) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(scores_.ensure(per_head * size_t(T) * esize_));
    const size_t n_rows = static_cast<size_t>(rows);
    std::vector<int32_t> ids(n_rows), seqs(n_rows), pos(n_rows);
    std::vector<int64_t> last(static_cast<size_t>(batch_));
    for (int64_t b = 0; b < batch_; ++b) {
      const auto& p = prompts[size_t(b)];
      for (int64_t t = 0; t < T; ++t) {
        // Right padding, as on the CPU: causality keeps real tokens from seeing it.
        ids[size_t(b * T + t)] = t < int64_t(p.size()) ? p[size_t(t)] : int32_t(c_.pad_token_id);
        seqs[size_t(b * T + t)] = int32_t(b);
        pos[size_t(b * T + t)] = int32_t(t);
      }
      last[size_t(b)] = b * T + int64_t(p.size()) - 1;
      seq_len_[size_t(b)] = int64_t(p.size());
    }
    LLM_CUDA(cudaMemcpyAsync(pre_.ids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_));
    LLM_CUDA(cudaMemcpyAsync(pre_.seqs.get(), seqs.data(), seqs.size() * 4, cudaMemcpyHostToDevice, stream_));
    LLM_CUDA(cudaMemcpyAsync(pre_.pos.get(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice, stream_));
    LLM_CUDA(cudaMemcpyAsync(last_rows_d_.get(), last.data(), last.size() * 8, cudaMemcpyHostToDevice, stream_));
    TUNABLEOP_RETURN_IF_ERROR(forward(Phase::kPrefill, rows, T, pre_));
    return fetch_next(next);
  }

  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override {
    if (int64_t(tokens.size()) != batch_ || batch_ == 0) {
      return Status::invalid_argument("decode: got " + std::to_string(tokens.size()) + " tokens for a batch of " +
                                      std::to_string(batch_) + " (call prefill first)");
    }
    for (int64_t b = 0; b < batch_; ++b) {
      if (tokens[size_t(b)] < 0 || tokens[size_t(b)] >= c_.vocab_size) {
        return Status::invalid_argument("decode: token id " + std::to_string(tokens[size_t(b)]) +
                                        " is outside the vocabulary");
      }
      if (seq_len_[size_t(b)] >= o_.max_seq) {
        return Status::invalid_argument("decode: sequence " + std::to_string(b) + " is full (KV cache of " +
                                        std::to_string(o_.max_seq) + " positions)");
      }
      ids_h_[b] = tokens[size_t(b)];
      pos_h_[b] = int32_t(seq_len_[size_t(b)]);
    }
    LLM_CUDA(cudaSetDevice(ctx_.device().ordinal));
    LLM_CUDA(cudaMemcpyAsync(dec_.ids.get(), ids_h_, size_t(batch_) * 4, cudaMemcpyHostToDevice, stream_));
    LLM_CUDA(cudaMemcpyAsync(dec_.pos.get(), pos_h_, size_t(batch_) * 4, cudaMemcpyHostToDevice, stream_));
    // A graph holds the GEMM solutions chosen when it was captured: one per batch size and
    // TunableOp on/off (the comparison benchmark flips it between runs).
    const std::pair<int64_t, bool> key{batch_, ctx_.config().snapshot().enabled};
    auto it = graphs_.find(key);
    if (it != graphs_.end()) {
      LLM_CUDA(cudaGraphLaunch(it->second.exec, stream_));
      linear_.add_calls(it->second.calls, 1);
    } else {
      // First step of this kind runs eagerly: any tuning, workspace growth or attribute setup
      // happens here, outside capture. Then the step is captured for the next ones.
      TUNABLEOP_RETURN_IF_ERROR(forward(Phase::kDecode, batch_, 1, dec_));
      if (o_.cuda_graph && graph_error_.empty()) capture(key);
    }
    TUNABLEOP_RETURN_IF_ERROR(fetch_next(next));
    for (int64_t b = 0; b < batch_; ++b) ++seq_len_[size_t(b)];
    return Status::ok();
  }

  Status last_logits(std::vector<float>* out) override {
    const size_t n = size_t(batch_ * c_.vocab_size);
    out->resize(n);
    if (e_ == cuda::Elem::kF32) {
      LLM_CUDA(cudaMemcpy(out->data(), logits_.get(), n * 4, cudaMemcpyDeviceToHost));
      return Status::ok();
    }
    std::vector<uint16_t> raw(n);
    LLM_CUDA(cudaMemcpy(raw.data(), logits_.get(), n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) (*out)[i] = to_float(bf16{raw[i]});
    return Status::ok();
  }

 private:
  Status upload(DeviceBuffer& dst, const void* src, size_t bytes) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(bytes));
    LLM_CUDA(cudaMemcpy(dst.get(), src, bytes, cudaMemcpyHostToDevice));
    return Status::ok();
  }

  // fp32 host weights -> E on the device.
  Status upload_weight(DeviceBuffer& dst, const std::vector<float>& src, DeviceBuffer& staging) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(src.size() * esize_));
    if (e_ == cuda::Elem::kF32) return upload(dst, src.data(), src.size() * 4);
    TUNABLEOP_RETURN_IF_ERROR(upload(staging, src.data(), src.size() * 4));
    LLM_CUDA(cuda::convert_f32(e_, staging.as<float>(), dst.get(), int64_t(src.size()), stream_));
    LLM_CUDA(cudaStreamSynchronize(stream_));
    return Status::ok();
  }

  Status random_weight(DeviceBuffer& dst, int64_t n, uint64_t seed, RandomTensor t, int64_t layer) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(n) * esize_));
    const RandomInit init = random_init(c_, t);
    LLM_CUDA(cuda::fill_random(e_, dst.get(), n, seed, random_stream(t, layer), init.scale, init.offset, stream_));
    return Status::ok();
  }

  Status upload_weights(const ModelSpec& spec, uint64_t seed) {
    const int64_t H = c_.hidden_size, I = c_.intermediate_size, V = c_.vocab_size;
    layers_.resize(size_t(c_.num_layers));
    if (spec.builtin) {
      // Generated on the GPU: the real-shaped models never exist on the host.
      TUNABLEOP_RETURN_IF_ERROR(random_weight(embed_, V * H, seed, RandomTensor::kEmbed, -1));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(final_norm_, H, seed, RandomTensor::kFinalNorm, -1));
      if (!c_.tie_word_embeddings) {
        TUNABLEOP_RETURN_IF_ERROR(random_weight(lm_head_, V * H, seed, RandomTensor::kLmHead, -1));
      }
      for (int64_t l = 0; l < c_.num_layers; ++l) {
        DeviceLayer& d = layers_[size_t(l)];
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.attn_norm, H, seed, RandomTensor::kAttnNorm, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wqkv, c_.qkv_dim() * H, seed, RandomTensor::kWqkv, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wo, H * c_.q_dim(), seed, RandomTensor::kWo, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.mlp_norm, H, seed, RandomTensor::kMlpNorm, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_gate_up, 2 * I * H, seed, RandomTensor::kGateUp, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_down, H * I, seed, RandomTensor::kDown, l));
      }
      LLM_CUDA(cudaStreamSynchronize(stream_));
      return Status::ok();
    }
    auto w = load_model(spec.dir);
    if (!w.is_ok()) return w.status();
    DeviceBuffer staging;
    TUNABLEOP_RETURN_IF_ERROR(upload_weight(embed_, w->embed, staging));
    TUNABLEOP_RETURN_IF_ERROR(upload_weight(final_norm_, w->final_norm, staging));
    if (!w->lm_head.empty()) TUNABLEOP_RETURN_IF_ERROR(upload_weight(lm_head_, w->lm_head, staging));
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const LayerWeights& h = w->layers[size_t(l)];
      DeviceLayer& d = layers_[size_t(l)];
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.attn_norm, h.attn_norm, staging));
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.wqkv, h.wqkv, staging));
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.wo, h.wo, staging));
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.mlp_norm, h.mlp_norm, staging));
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.w_gate_up, h.w_gate_up, staging));
      TUNABLEOP_RETURN_IF_ERROR(upload_weight(d.w_down, h.w_down, staging));
    }
    return Status::ok();
  }

  Status ensure_rows(Activations& a, int64_t rows) {
    if (rows <= a.rows) return Status::ok();
    const size_t r = size_t(rows), H = size_t(c_.hidden_size), I = size_t(c_.intermediate_size);
    TUNABLEOP_RETURN_IF_ERROR(a.x.ensure(r * H * 4));
    TUNABLEOP_RETURN_IF_ERROR(a.xn.ensure(r * H * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.tmp.ensure(r * H * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.qkv.ensure(r * size_t(c_.qkv_dim()) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.attn.ensure(r * size_t(c_.q_dim()) * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.gate_up.ensure(r * 2 * I * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.act.ensure(r * I * esize_));
    TUNABLEOP_RETURN_IF_ERROR(a.ids.ensure(r * 4));
    TUNABLEOP_RETURN_IF_ERROR(a.seqs.ensure(r * 4));
    TUNABLEOP_RETURN_IF_ERROR(a.pos.ensure(r * 4));
    a.rows = rows;
    return Status::ok();
  }

  Status fetch_next(std::vector<int32_t>* next) {
    LLM_CUDA(cudaMemcpyAsync(next_h_, next_d_.get(), size_t(batch_) * 4, cudaMemcpyDeviceToHost, stream_));
    LLM_CUDA(cudaStreamSynchronize(stream_));
    next->assign(next_h_, next_h_ + batch_);
    return Status::ok();
  }

  const void* lm_head() const { return c_.tie_word_embeddings ? embed_.get() : lm_head_.get(); }

  // Scores = q k^T (scaled), causal softmax, probabilities x v (prefill_attention_gemms).
  Status prefill_attention(int64_t layer, int64_t T, Activations& a) {
    const int64_t hd = c_.head_dim, group = c_.num_heads / c_.num_kv_heads, M = T * group;
    const int64_t mats = batch_ * c_.num_kv_heads;
    const AttentionGemms g = prefill_attention_gemms(c_, o_.dtype, batch_, T, o_.max_seq);
    TUNABLEOP_RETURN_IF_ERROR(linear_.gemm(
        Phase::kPrefill, g.scores, GemmOperands{k_cache_[size_t(layer)].get(), q_perm_.get(), scores_.get(), stream_}));
    LLM_CUDA(cuda::causal_softmax(e_, scores_.get(), mats, M, T, group, stream_));
    TUNABLEOP_RETURN_IF_ERROR(linear_.gemm(
        Phase::kPrefill, g.output, GemmOperands{v_cache_[size_t(layer)].get(), scores_.get(), o_perm_.get(), stream_}));
    LLM_CUDA(cuda::unpermute_heads(e_, o_perm_.get(), batch_, c_.num_kv_heads, T, group, hd, a.attn.get(), stream_));
    return Status::ok();
  }

  // rows = batch_ * T tokens (ids/seqs/pos in `a` already on the device).
  Status forward(Phase phase, int64_t rows, int64_t T, Activations& a) {
    const ModelConfig& c = c_;
    const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), QKV = c.qkv_dim();
    const float eps = float(c.rms_norm_eps);
    const bool gemma_norm = c.norm_adds_one();
    const cuda::Act act = c.activation == Activation::kSilu       ? cuda::Act::kSilu
                          : c.activation == Activation::kGeluTanh ? cuda::Act::kGeluTanh
                                                                  : cuda::Act::kGeluErf;
    const DType dt = o_.dtype;
    float* x = a.x.as<float>();

    LLM_CUDA(cuda::embedding(e_, a.ids.as<int32_t>(), rows, embed_.get(), H, embed_scale_, x, stream_));
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const DeviceLayer& L = layers_[size_t(l)];
      // attention block
      LLM_CUDA(cuda::rmsnorm(e_, x, L.attn_norm.get(), rows, H, eps, gemma_norm, a.xn.get(), stream_));
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, dt, rows, H, QKV, a.xn.get(), L.wqkv.get(), a.qkv.get(), stream_));
      cuda::RopeStoreArgs r;
      r.qkv = a.qkv.get();
      r.rows = rows;
      r.row_stride = QKV;
      r.n_heads = c.num_heads;
      r.n_kv_heads = c.num_kv_heads;
      r.head_dim = c.head_dim;
      r.seqs = a.seqs.as<int32_t>();
      r.positions = a.pos.as<int32_t>();
      r.cos = rope_cos_.as<float>();
      r.sin = rope_sin_.as<float>();
      r.k_cache = k_cache_[size_t(l)].get();
      r.v_cache = v_cache_[size_t(l)].get();
      r.max_seq = o_.max_seq;
      r.q_perm = phase == Phase::kPrefill ? q_perm_.get() : nullptr;
      r.tokens_per_seq = T;
      LLM_CUDA(cuda::rope_store(e_, r, stream_));
      if (phase == Phase::kPrefill) {
        TUNABLEOP_RETURN_IF_ERROR(prefill_attention(l, T, a));
      } else {
        LLM_CUDA(cuda::decode_attention(e_, a.qkv.get(), rows, QKV, c.num_heads, c.num_kv_heads, c.head_dim,
                                        a.pos.as<int32_t>(), k_cache_[size_t(l)].get(), v_cache_[size_t(l)].get(),
                                        o_.max_seq, float(1.0 / std::sqrt(double(c.head_dim))), a.attn.get(), stream_));
      }
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, dt, rows, Q, H, a.attn.get(), L.wo.get(), a.tmp.get(), stream_));
      LLM_CUDA(cuda::add_residual(e_, x, a.tmp.get(), rows * H, stream_));
      // MLP block
      LLM_CUDA(cuda::rmsnorm(e_, x, L.mlp_norm.get(), rows, H, eps, gemma_norm, a.xn.get(), stream_));
      TUNABLEOP_RETURN_IF_ERROR(
          linear_(phase, dt, rows, H, 2 * I, a.xn.get(), L.w_gate_up.get(), a.gate_up.get(), stream_));
      LLM_CUDA(cuda::gated_activation(e_, a.gate_up.get(), rows, I, act, a.act.get(), stream_));
      TUNABLEOP_RETURN_IF_ERROR(linear_(phase, dt, rows, I, H, a.act.get(), L.w_down.get(), a.tmp.get(), stream_));
      LLM_CUDA(cuda::add_residual(e_, x, a.tmp.get(), rows * H, stream_));
    }
    // Logits for the last real position of each sequence only (decode rows already are).
    const float* last = x;
    if (phase == Phase::kPrefill) {
      LLM_CUDA(cuda::gather_rows(x, H, last_rows_d_.as<int64_t>(), batch_, last_x_.as<float>(), stream_));
      last = last_x_.as<float>();
    }
    LLM_CUDA(cuda::rmsnorm(e_, last, final_norm_.get(), batch_, H, eps, gemma_norm, last_norm_.get(), stream_));
    TUNABLEOP_RETURN_IF_ERROR(
        linear_(phase, dt, batch_, H, c.vocab_size, last_norm_.get(), lm_head(), logits_.get(), stream_));
    LLM_CUDA(cuda::argmax_rows(e_, logits_.get(), batch_, c.vocab_size, next_d_.as<int32_t>(), stream_));
    return Status::ok();
  }

  // Captures one decode step for `key`. A failure (a GEMM solution that cannot be captured,
  // say) turns graphs off for this engine with the reason in device_name(); decode goes on
  // eagerly.
  void capture(const std::pair<int64_t, bool>& key) {
    const auto before = linear_.problems();
    cudaGraph_t graph = nullptr;
    Status st = cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    Status fwd = st.is_ok() ? forward(Phase::kDecode, batch_, 1, dec_) : Status::ok();
    if (st.is_ok()) st = cuda_check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    const auto captured = LinearOp::difference(before, linear_.problems());
    linear_.add_calls(captured, -1);  // captured, not run
    if (st.is_ok() && !fwd.is_ok()) st = fwd;
    Graph g;
    if (st.is_ok()) st = cuda_check(cudaGraphInstantiate(&g.exec, graph, 0), "cudaGraphInstantiate");
    if (graph) cudaGraphDestroy(graph);
    if (!st.is_ok()) {
      (void)cudaGetLastError();  // capture errors are not sticky; clear them
      graph_error_ = st.message();
      ctx_.log().warn("llm: decode runs without a CUDA graph: " + st.to_string());
      return;
    }
    g.calls = captured;
    graphs_[key] = std::move(g);
  }

  struct Graph {
    cudaGraphExec_t exec = nullptr;
    std::vector<LinearOp::Problem> calls;
  };

  ModelConfig c_;
  EngineOptions o_;
  Context& ctx_;
  LinearOp linear_;
  cuda::Elem e_ = cuda::Elem::kBF16;
  size_t esize_ = 2;
  cudaStream_t stream_ = nullptr;
  std::string device_desc_, graph_error_;
  float embed_scale_ = 1;
  DeviceBuffer embed_, final_norm_, lm_head_, rope_cos_, rope_sin_;
  std::vector<DeviceLayer> layers_;
  std::vector<DeviceBuffer> k_cache_, v_cache_;
  Activations pre_, dec_;
  DeviceBuffer q_perm_, o_perm_, scores_;
  DeviceBuffer last_x_, last_norm_, logits_, next_d_, last_rows_d_;
  int32_t *ids_h_ = nullptr, *pos_h_ = nullptr, *next_h_ = nullptr;
  std::map<std::pair<int64_t, bool>, Graph> graphs_;
  std::vector<int64_t> seq_len_;
  int64_t batch_ = 0, padded_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Engine>> make_cuda_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                   EngineOptions options, Context& ctx) {
  if (ctx.device().kind != DeviceKind::kCuda) return Status::invalid_argument("make_cuda_engine needs a CUDA context");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= ctx.device().ordinal) {
    (void)cudaGetLastError();
    return Status::unsupported("no CUDA device " + std::to_string(ctx.device().ordinal) + " on this machine");
  }
  auto c = spec_config(spec, layers);
  if (!c.is_ok()) return c.status();
  TUNABLEOP_RETURN_IF_ERROR(c->validate(spec.builtin ? "builtin:" + spec.preset : spec.dir));
  if (options.max_seq <= 0) options.max_seq = c->max_position_embeddings;
  if (options.max_batch < 1) return Status::invalid_argument("max_batch must be >= 1");
  if (options.pad_multiple < 1) return Status::invalid_argument("pad_multiple must be >= 1");
  // Device memory is the runtime's to refuse; the sizes must still count without overflow.
  TUNABLEOP_RETURN_IF_ERROR(
      check_engine_fits(*c, options, options.dtype == DType::kF32 ? 4 : 2, /*host_memory=*/false));
  auto e = std::make_unique<CudaEngine>(*c, options, ctx);
  TUNABLEOP_RETURN_IF_ERROR(e->init(spec, seed));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace tunableop::llm
