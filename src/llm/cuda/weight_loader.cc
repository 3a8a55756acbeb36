#include "llm/cuda/weight_loader.h"

#include "cuda_common/cuda_check.h"
#include "llm/parallel/shard_kernels.h"

namespace tunableop::llm::cuda {

using ::tunableop::cuda::DeviceBuffer;

namespace {

Status copy_to_device(DeviceBuffer& dst, const void* src, size_t bytes) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(bytes));
  TUNABLEOP_CUDA_TRY(cudaMemcpy(dst.get(), src, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

}  // namespace

// fp32 host weights -> E on the device.
Status CudaWeights::copy_weight(DeviceBuffer& dst, const std::vector<float>& src, DeviceBuffer& staging) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(src.size() * esize_));
  if (e_ == Elem::kF32) return copy_to_device(dst, src.data(), src.size() * 4);
  TUNABLEOP_RETURN_IF_ERROR(copy_to_device(staging, src.data(), src.size() * 4));
  TUNABLEOP_CUDA_TRY(convert_f32(e_, staging.as<float>(), dst.get(), int64_t(src.size()), stream_));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status::ok();
}

Status CudaWeights::random_weight(DeviceBuffer& dst, const ModelConfig& c, int64_t n, uint64_t seed, RandomTensor t,
                                  int64_t layer) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(n) * esize_));
  const RandomInit init = random_init(c, t);
  TUNABLEOP_CUDA_TRY(fill_random(e_, dst.get(), n, seed, random_stream(t, layer), init.scale, init.offset, stream_));
  return Status::ok();
}

Status CudaWeights::load(const ModelSpec& spec, uint64_t seed, const ModelConfig& c, Elem e, cudaStream_t s) {
  e_ = e, esize_ = e == Elem::kF32 ? 4 : 2, stream_ = s;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  layers_.resize(size_t(c.num_layers));
  if (spec.builtin) {
    // Generated on the GPU: the real-shaped models never exist on the host.
    TUNABLEOP_RETURN_IF_ERROR(random_weight(embed_, c, V * H, seed, RandomTensor::kEmbed, -1));
    TUNABLEOP_RETURN_IF_ERROR(random_weight(final_norm_, c, H, seed, RandomTensor::kFinalNorm, -1));
    if (!c.tie_word_embeddings) {
      TUNABLEOP_RETURN_IF_ERROR(random_weight(lm_head_, c, V * H, seed, RandomTensor::kLmHead, -1));
    }
    for (int64_t l = 0; l < c.num_layers; ++l) {
      Layer& d = layers_[size_t(l)];
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.attn_norm, c, H, seed, RandomTensor::kAttnNorm, l));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wqkv, c, c.qkv_dim() * H, seed, RandomTensor::kWqkv, l));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.wo, c, H * c.q_dim(), seed, RandomTensor::kWo, l));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.mlp_norm, c, H, seed, RandomTensor::kMlpNorm, l));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_gate_up, c, 2 * I * H, seed, RandomTensor::kGateUp, l));
      TUNABLEOP_RETURN_IF_ERROR(random_weight(d.w_down, c, H * I, seed, RandomTensor::kDown, l));
      DeviceBuffer unused;
      TUNABLEOP_RETURN_IF_ERROR(load_family(c, l, seed, nullptr, unused));
    }
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  } else {
    auto w = load_model(spec.dir);
    if (!w.is_ok()) return w.status();
    DeviceBuffer staging;
    TUNABLEOP_RETURN_IF_ERROR(copy_weight(embed_, w->embed, staging));
    TUNABLEOP_RETURN_IF_ERROR(copy_weight(final_norm_, w->final_norm, staging));
    if (!w->lm_head.empty()) TUNABLEOP_RETURN_IF_ERROR(copy_weight(lm_head_, w->lm_head, staging));
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const LayerWeights& h = w->layers[size_t(l)];
      Layer& d = layers_[size_t(l)];
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.attn_norm, h.attn_norm, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.wqkv, h.wqkv, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.wo, h.wo, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.mlp_norm, h.mlp_norm, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.w_gate_up, h.w_gate_up, staging));
      TUNABLEOP_RETURN_IF_ERROR(copy_weight(d.w_down, h.w_down, staging));
      TUNABLEOP_RETURN_IF_ERROR(load_family(c, l, seed, &h, staging));
    }
  }
  make_view(c, false);
  view_.bytes = c.parameter_count() * int64_t(esize_);
  return Status::ok();
}

Status CudaWeights::load_shard(const ModelSpec& spec, uint64_t seed, const TensorParallelLayout& tp, int rank,
                               const ModelWeights* host, Elem e, cudaStream_t s) {
  e_ = e, esize_ = e == Elem::kF32 ? 4 : 2, stream_ = s;
  const ModelConfig& full = tp.full();
  const int64_t H = full.hidden_size, V = full.vocab_size;
  if (!spec.builtin && !host) return Status::internal("a tensor-parallel rank of a model directory needs its weights");
  DeviceBuffer staging;
  // `host` is the whole model (cut here) or already this rank's shard (a process holding one
  // rank read only its part: its config is the rank's local one).
  const bool cut =
      host && host->config.num_heads == full.num_heads && host->config.intermediate_size == full.intermediate_size;
  auto whole = [](int64_t rows, int64_t cols) { return std::vector<TensorBlock>{{0, rows, 0, cols, cols}}; };
  auto put = [&](DeviceBuffer& dst, RandomTensor t, int64_t layer, const std::vector<float>* src,
                 const std::vector<TensorBlock>& blocks) -> Status {
    if (host) return copy_weight(dst, cut ? take_blocks(*src, blocks) : *src, staging);
    TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(shard_elements(blocks)) * esize_));
    const RandomInit init = random_init(full, t);
    size_t at = 0;
    for (const TensorBlock& b : blocks) {
      TUNABLEOP_CUDA_TRY(fill_random_block(e_ == Elem::kBF16, dst.as<char>() + at * esize_, b.rows, b.cols, b.full_cols,
                                           b.row0, b.col0, seed, random_stream(t, layer), init.scale, init.offset,
                                           stream_));
      at += size_t(b.rows * b.cols);
    }
    return Status::ok();
  };
  const bool tied = full.tie_word_embeddings;
  const std::vector<float>* head = host ? (host->lm_head.empty() ? &host->embed : &host->lm_head) : nullptr;
  TUNABLEOP_RETURN_IF_ERROR(put(embed_, RandomTensor::kEmbed, -1, host ? &host->embed : nullptr, whole(V, H)));
  TUNABLEOP_RETURN_IF_ERROR(
      put(final_norm_, RandomTensor::kFinalNorm, -1, host ? &host->final_norm : nullptr, whole(1, H)));
  TUNABLEOP_RETURN_IF_ERROR(
      put(lm_head_, tied ? RandomTensor::kEmbed : RandomTensor::kLmHead, -1, head, tp.lm_head(rank)));
  layers_.resize(size_t(full.num_layers));
  for (int64_t l = 0; l < full.num_layers; ++l) {
    const LayerWeights* h = host ? &host->layers[size_t(l)] : nullptr;
    Layer& d = layers_[size_t(l)];
    TUNABLEOP_RETURN_IF_ERROR(put(d.attn_norm, RandomTensor::kAttnNorm, l, h ? &h->attn_norm : nullptr, whole(1, H)));
    TUNABLEOP_RETURN_IF_ERROR(put(d.wqkv, RandomTensor::kWqkv, l, h ? &h->wqkv : nullptr, tp.wqkv(rank)));
    TUNABLEOP_RETURN_IF_ERROR(put(d.wo, RandomTensor::kWo, l, h ? &h->wo : nullptr, tp.wo(rank)));
    TUNABLEOP_RETURN_IF_ERROR(put(d.mlp_norm, RandomTensor::kMlpNorm, l, h ? &h->mlp_norm : nullptr, whole(1, H)));
    TUNABLEOP_RETURN_IF_ERROR(
        put(d.w_gate_up, RandomTensor::kGateUp, l, h ? &h->w_gate_up : nullptr, tp.gate_up(rank)));
    TUNABLEOP_RETURN_IF_ERROR(put(d.w_down, RandomTensor::kDown, l, h ? &h->w_down : nullptr, tp.down(rank)));
  }
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  make_view(full, true);
  view_.bytes = int64_t(embed_.bytes() + final_norm_.bytes() + lm_head_.bytes());
  for (const Layer& d : layers_) {
    view_.bytes += int64_t(d.attn_norm.bytes() + d.wqkv.bytes() + d.wo.bytes() + d.mlp_norm.bytes() +
                           d.w_gate_up.bytes() + d.w_down.bytes());
  }
  return Status::ok();
}

Status CudaWeights::load_family(const ModelConfig& c, int64_t l, uint64_t seed, const LayerWeights* host,
                                DeviceBuffer& staging) {
  Layer& d = layers_[size_t(l)];
  struct Tensor {
    bool has;
    DeviceBuffer& dst;
    int64_t n;
    RandomTensor t;
    const std::vector<float>* src;
  };
  const Tensor tensors[] = {
      {c.qkv_bias, d.qkv_bias, c.qkv_dim(), RandomTensor::kQkvBias, host ? &host->qkv_bias : nullptr},
      {c.qk_norm, d.q_norm, c.head_dim, RandomTensor::kQNorm, host ? &host->q_norm : nullptr},
      {c.qk_norm, d.k_norm, c.head_dim, RandomTensor::kKNorm, host ? &host->k_norm : nullptr},
      {c.post_norms, d.post_attn_norm, c.hidden_size, RandomTensor::kPostAttnNorm,
       host ? &host->post_attn_norm : nullptr},
      {c.post_norms, d.post_mlp_norm, c.hidden_size, RandomTensor::kPostMlpNorm, host ? &host->post_mlp_norm : nullptr},
  };
  for (const Tensor& t : tensors) {
    if (!t.has) continue;
    TUNABLEOP_RETURN_IF_ERROR(host ? copy_weight(t.dst, *t.src, staging) : random_weight(t.dst, c, t.n, seed, t.t, l));
  }
  return Status::ok();
}

// A shard always holds its own lm_head rows (tied or not); one device reads the embedding as
// the lm_head when they are tied. The family tensors are null where the model has none.
void CudaWeights::make_view(const ModelConfig& c, bool sharded) {
  view_ = DeviceWeights{};
  view_.embed = embed_.get();
  view_.final_norm = final_norm_.get();
  view_.lm_head = (!sharded && c.tie_word_embeddings) ? embed_.get() : lm_head_.get();
  auto opt = [](const DeviceBuffer& b) -> const void* { return b.bytes() ? b.get() : nullptr; };
  for (const Layer& d : layers_) {
    DeviceWeights::Layer v{d.attn_norm.get(), d.wqkv.get(),      d.wo.get(),
                           d.mlp_norm.get(),  d.w_gate_up.get(), d.w_down.get()};
    v.qkv_bias = opt(d.qkv_bias), v.q_norm = opt(d.q_norm), v.k_norm = opt(d.k_norm);
    v.post_attn_norm = opt(d.post_attn_norm), v.post_mlp_norm = opt(d.post_mlp_norm);
    view_.layers.push_back(v);
  }
}

}  // namespace tunableop::llm::cuda
