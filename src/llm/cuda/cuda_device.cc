// The CUDA device of the forward pass: weights, activations and KV cache in E (bf16 or fp32)
// with fp32 accumulation and an fp32 residual stream; kernels in kernels.cu on one stream;
// GEMMs through the model's LinearOp (tunableop on the context's GPU).
//
// Attention, prefill and decode, is the attention op on the device's stream (layer_attention.h:
// flash attention, cuDNN SDPA or split-KV decode, on a static or paged cache). Decode reads
// each sequence's length on the device, which lets the whole decode step be captured once as a
// CUDA graph and replayed.
#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <utility>

#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"
#include "llm/cuda/kernels.h"
#include "llm/engine_limits.h"
#include "llm/layer_attention.h"
#include "llm/model.h"
#include "llm/rope.h"

namespace tunableop::llm {
namespace {

using ::tunableop::cuda::cuda_status;
using ::tunableop::cuda::DeviceBuffer;
using ::tunableop::cuda::GraphExec;
using ::tunableop::cuda::PinnedBuffer;
using ::tunableop::cuda::Stream;

struct LayerBuffers {
  DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
};

class CudaKernels final : public DeviceKernels {
 public:
  CudaKernels(const ModelConfig& c, const EngineOptions& o, Context& ctx) : DeviceKernels(c), o_(o), ctx_(ctx) {}

  Status init(const ModelSpec& spec, uint64_t seed) {
    if (o_.dtype != DType::kBF16 && o_.dtype != DType::kF32) {
      return Status::invalid_argument("the CUDA engine computes in bf16 or fp32");
    }
    e_ = o_.dtype == DType::kBF16 ? cuda::Elem::kBF16 : cuda::Elem::kF32;
    esize_ = dtype_size(o_.dtype);
    TUNABLEOP_RETURN_IF_ERROR(make_current());
    TUNABLEOP_RETURN_IF_ERROR(stream_.create());
    cudaDeviceProp prop{};
    TUNABLEOP_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx_.device().ordinal));
    device_desc_ = ctx_.device().to_string() + " (" + dtype_name(o_.dtype) + ", " + prop.name + ")";
    const int64_t hd = config().head_dim;
    TUNABLEOP_RETURN_IF_ERROR(load_weights(spec, seed));
    RopeTable rope = make_rope_table(hd, config().rope_theta, o_.max_seq);
    TUNABLEOP_RETURN_IF_ERROR(copy_to_device(rope_cos_, rope.cos.data(), rope.cos.size() * 4));
    TUNABLEOP_RETURN_IF_ERROR(copy_to_device(rope_sin_, rope.sin.data(), rope.sin.size() * 4));
    return Status::ok();
  }

  std::string name() const override {
    return device_desc_ + (o_.cuda_graph
                               ? (graph_error_.empty() ? ", CUDA graph decode" : ", no CUDA graph: " + graph_error_)
                               : ", eager decode");
  }
  DType dtype() const override { return o_.dtype; }
  void* stream() const override { return stream_.get(); }
  const DeviceWeights& weights() const override { return view_; }
  Status make_current() override {
    TUNABLEOP_CUDA_TRY(cudaSetDevice(ctx_.device().ordinal));
    return Status::ok();
  }

  StatusOr<Buffer> alloc(size_t bytes) override {
    DeviceBuffer b;
    TUNABLEOP_RETURN_IF_ERROR(b.ensure(bytes));
    return Buffer(b.release(), bytes, [](void* p) { cudaFree(p); });
  }
  StatusOr<Buffer> alloc_host(size_t bytes) override {
    PinnedBuffer b;
    TUNABLEOP_RETURN_IF_ERROR(b.ensure(bytes));
    return Buffer(b.release(), bytes, [](void* p) { cudaFreeHost(p); });
  }
  Status upload(void* dst, const void* src, size_t bytes) override {
    TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_.get()));
    return Status::ok();
  }
  Status download(void* dst, const void* src, size_t bytes) override {
    TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    return Status::ok();
  }

  Status embedding(const Pass& p, float scale, float* x) override {
    TUNABLEOP_CUDA_TRY(
        cuda::embedding(e_, p.ids, p.rows(), view_.embed, config().hidden_size, scale, x, stream_.get()));
    return Status::ok();
  }
  Status rmsnorm(const float* x, const void* w, int64_t rows, void* out) override {
    const ModelConfig& c = config();
    TUNABLEOP_CUDA_TRY(
        cuda::rmsnorm(e_, x, w, rows, c.hidden_size, float(c.rms_norm_eps), c.norm_adds_one(), out, stream_.get()));
    return Status::ok();
  }
  Status add_residual(float* x, const void* y, int64_t rows) override {
    TUNABLEOP_CUDA_TRY(cuda::add_residual(e_, x, y, rows * config().hidden_size, stream_.get()));
    return Status::ok();
  }
  Status rope_kv(const Pass& p, int64_t layer, void* qkv, KvCache& cache) override {
    const ModelConfig& c = config();
    cuda::RopeStoreArgs r;
    r.qkv = qkv;
    r.rows = p.rows();
    r.row_stride = c.qkv_dim();
    r.n_heads = c.num_heads;
    r.n_kv_heads = c.num_kv_heads;
    r.head_dim = c.head_dim;
    r.seqs = p.seqs;
    r.positions = p.positions;
    r.cos = rope_cos_.as<float>();
    r.sin = rope_sin_.as<float>();
    if (cache.kind() == KvCacheKind::kPaged) {  // pages through the block table; padding rows skipped
      const auto& pc = static_cast<const PagedKvCache&>(cache);
      r.k_cache = pc.k(layer);
      r.v_cache = pc.v(layer);
      r.block_table = pc.block_table();
      r.page_size = pc.geometry().page_size;
      r.pages_per_seq = pc.geometry().pages_per_seq();
      r.seq_lens = p.seq_lens;
    } else {
      auto sc = as_static(cache, "the CUDA rope_kv");
      if (!sc.is_ok()) return sc.status();
      r.k_cache = (*sc)->k(layer);
      r.v_cache = (*sc)->v(layer);
      r.max_seq = (*sc)->max_seq();
    }
    TUNABLEOP_CUDA_TRY(cuda::rope_store(e_, r, stream_.get()));
    return Status::ok();
  }
  Status attention(const Pass& p, int64_t layer, const void* qkv, KvCache& cache, LinearOp& linear,
                   void* out) override {
    auto a = layer_attention(config(), o_.dtype, p, layer, qkv, cache, out);
    if (!a.is_ok()) return a.status();
    a->operands.stream = stream_.get();
    return linear.attention(p.phase, a->params, a->operands);
  }
  Status gated_activation(const void* gate_up, int64_t rows, void* out) override {
    const Activation a = config().activation;
    const cuda::Act act = a == Activation::kSilu       ? cuda::Act::kSilu
                          : a == Activation::kGeluTanh ? cuda::Act::kGeluTanh
                                                       : cuda::Act::kGeluErf;
    TUNABLEOP_CUDA_TRY(cuda::gated_activation(e_, gate_up, rows, config().intermediate_size, act, out, stream_.get()));
    return Status::ok();
  }
  Status gather_rows(const float* x, const int64_t* rows, int64_t count, float* out) override {
    TUNABLEOP_CUDA_TRY(cuda::gather_rows(x, config().hidden_size, rows, count, out, stream_.get()));
    return Status::ok();
  }
  Status argmax(const void* logits, int64_t rows, int32_t* out) override {
    TUNABLEOP_CUDA_TRY(cuda::argmax_rows(e_, logits, rows, config().vocab_size, out, stream_.get()));
    return Status::ok();
  }

  // A graph holds the GEMM solutions chosen when it was captured: one per batch size and
  // TunableOp on/off (the comparison benchmark flips it between runs).
  Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step) override {
    const std::pair<int64_t, bool> key{batch, ctx_.config().snapshot().enabled};
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      TUNABLEOP_RETURN_IF_ERROR(it->second.exec.launch(stream_.get()));
      linear.add_calls(it->second.calls, 1);
      linear.add_attention_calls(it->second.attention_calls, 1);
      return Status::ok();
    }
    // First step of this kind runs eagerly: any tuning, workspace growth or attribute setup
    // happens here, outside capture. Then the step is captured for the next ones.
    TUNABLEOP_RETURN_IF_ERROR(step());
    if (o_.cuda_graph && graph_error_.empty()) capture(key, linear, step);
    return Status::ok();
  }

 private:
  struct Graph {
    GraphExec exec;
    std::vector<LinearOp::Problem> calls, attention_calls;
  };

  // Captures one decode step for `key`. A failure (a GEMM solution that cannot be captured,
  // say) turns graphs off for this engine with the reason in name(); decode goes on eagerly.
  // The GEMMs a replay runs are not called through LinearOp: the calls made while capturing
  // are kept and credited to it on each replay.
  void capture(const std::pair<int64_t, bool>& key, LinearOp& linear, const std::function<Status()>& step) {
    const auto before = linear.problems();
    const auto attention_before = linear.attention_problems();
    Status st =
        cuda_status(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    Status fwd = st.is_ok() ? step() : Status::ok();
    Graph g;
    if (st.is_ok()) st = g.exec.end_capture(stream_.get());
    const auto captured = LinearOp::difference(before, linear.problems());
    const auto attention_captured = LinearOp::difference(attention_before, linear.attention_problems());
    linear.add_calls(captured, -1);  // captured, not run
    linear.add_attention_calls(attention_captured, -1);
    if (st.is_ok() && !fwd.is_ok()) st = fwd;
    if (!st.is_ok()) {
      (void)cudaGetLastError();  // capture errors are not sticky; clear them
      graph_error_ = st.message();
      ctx_.log().warn("llm: decode runs without a CUDA graph: " + st.to_string());
      return;
    }
    g.calls = captured;
    g.attention_calls = attention_captured;
    graphs_[key] = std::move(g);
  }

  Status copy_to_device(DeviceBuffer& dst, const void* src, size_t bytes) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(bytes));
    TUNABLEOP_CUDA_TRY(cudaMemcpy(dst.get(), src, bytes, cudaMemcpyHostToDevice));
    return Status::ok();
  }

  // fp32 host weights -> E on the device.
  Status copy_weight(DeviceBuffer& dst, const std::vector<float>& src, DeviceBuffer& staging) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(src.size() * esize_));
    if (e_ == cuda::Elem::kF32) return copy_to_device(dst, src.data(), src.size() * 4);
    TUNABLEOP_RETURN_IF_ERROR(copy_to_device(staging, src.data(), src.size() * 4));
    TUNABLEOP_CUDA_TRY(cuda::convert_f32(e_, staging.as<float>(), dst.get(), int64_t(src.size()), stream_.get()));
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    return Status::ok();
  }

  Status random_weight(DeviceBuffer& dst, int64_t n, uint64_t seed, RandomTensor t, int64_t layer) {
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(n) * esize_));
    const RandomInit init = random_init(config(), t);
    TUNABLEOP_CUDA_TRY(
        cuda::fill_random(e_, dst.get(), n, seed, random_stream(t, layer), init.scale, init.offset, stream_.get()));
    return Status::ok();
  }

  Status load_weights(const ModelSpec& spec, uint64_t seed) {
    const ModelConfig& c = config();
    const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    layers_.resize(size_t(c.num_layers));
    if (spec.builtin) {
      // Generated on the GPU: the real-shaped models never exist on the host.
      TUNABLEOP_RETURN_IF_ERROR(random_weight(embed_, V * H, seed, RandomTensor::kEmbed, -1));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(final_norm_, H, seed, RandomTensor::kFinalNorm, -1));
      if (!c.tie_word_embeddings) {
        TUNABLEOP_RETURN_IF_ERROR(random_weight(lm_head_, V * H, seed, RandomTensor::kLmHead, -1));
      }
      for (int64_t l = 0; l < c.num_layers; ++l) {
        LayerBuffers& d = layers_[size_t(l)];
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.attn_norm, H, seed, RandomTensor::kAttnNorm, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wqkv, c.qkv_dim() * H, seed, RandomTensor::kWqkv, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wo, H * c.q_dim(), seed, RandomTensor::kWo, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.mlp_norm, H, seed, RandomTensor::kMlpNorm, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_gate_up, 2 * I * H, seed, RandomTensor::kGateUp, l));
        TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_down, H * I, seed, RandomTensor::kDown, l));
      }
      TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    } else {
      auto w = load_model(spec.dir);
      if (!w.is_ok()) return w.status();
      DeviceBuffer staging;
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(embed_, w->embed, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(final_norm_, w->final_norm, staging));
      if (!w->lm_head.empty()) TUNABLEOP_RETURN_IF_ERROR(copy_weight(lm_head_, w->lm_head, staging));
      for (int64_t l = 0; l < c.num_layers; ++l) {
        const LayerWeights& h = w->layers[size_t(l)];
        LayerBuffers& d = layers_[size_t(l)];
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.attn_norm, h.attn_norm, staging));
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.wqkv, h.wqkv, staging));
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.wo, h.wo, staging));
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.mlp_norm, h.mlp_norm, staging));
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.w_gate_up, h.w_gate_up, staging));
        TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.w_down, h.w_down, staging));
      }
    }
    view_.embed = embed_.get();
    view_.final_norm = final_norm_.get();
    view_.lm_head = c.tie_word_embeddings ? embed_.get() : lm_head_.get();
    for (const LayerBuffers& d : layers_) {
      view_.layers.push_back(
          {d.attn_norm.get(), d.wqkv.get(), d.wo.get(), d.mlp_norm.get(), d.w_gate_up.get(), d.w_down.get()});
    }
    view_.bytes = c.parameter_count() * int64_t(esize_);
    return Status::ok();
  }

  EngineOptions o_;
  Context& ctx_;
  cuda::Elem e_ = cuda::Elem::kBF16;
  size_t esize_ = 2;
  Stream stream_;
  std::string device_desc_, graph_error_;
  DeviceBuffer embed_, final_norm_, lm_head_, rope_cos_, rope_sin_;
  std::vector<LayerBuffers> layers_;
  DeviceWeights view_;
  std::map<std::pair<int64_t, bool>, Graph> graphs_;
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
  TUNABLEOP_RETURN_IF_ERROR(prepare_engine_options(*c, spec.builtin ? "builtin:" + spec.preset : spec.dir, &options));
  // Device memory is the runtime's to refuse; the sizes must still count without overflow.
  TUNABLEOP_RETURN_IF_ERROR(
      check_engine_fits(*c, options, options.dtype == DType::kF32 ? 4 : 2, /*host_memory=*/false));
  auto device = std::make_unique<CudaKernels>(*c, options, ctx);
  TUNABLEOP_RETURN_IF_ERROR(device->init(spec, seed));
  return make_engine(std::move(device), options, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
}

}  // namespace tunableop::llm
