#include "llm/cuda/weight_loader.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "cuda_common/cuda_check.h"
#include "llm/cuda/fp8_kernels.h"
#include "llm/parallel/shard_kernels.h"

namespace tunableop::llm::cuda {

using ::tunableop::cuda::DeviceBuffer;

// fp32 host weights -> E on the device.
Status CudaWeights::copy_weight(DeviceBuffer& dst, const std::vector<float>& src, DeviceBuffer& staging) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(src.size() * esize_));
  if (e_ == Elem::kF32) return ::tunableop::cuda::upload(dst, src.data(), src.size() * 4, stream_);
  TUNABLEOP_RETURN_IF_ERROR(::tunableop::cuda::upload(staging, src.data(), src.size() * 4, stream_));
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

Status CudaWeights::load(const ModelSpec& spec, uint64_t seed, const ModelConfig& c, Elem e, cudaStream_t s,
                         EngineOptions::Fp8 fp8) {
  e_ = e, esize_ = e == Elem::kF32 ? 4 : 2, stream_ = s;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  layers_.resize(size_t(c.num_layers));
  scales_.clear();
  // Built-in models are generated on the GPU (the real-shaped ones never exist on the host);
  // a directory's tensors come from its host weights.
  std::optional<ModelWeights> w;
  if (!spec.builtin) {
    auto loaded = load_model(spec.dir);
    if (!loaded.is_ok()) return loaded.status();
    w = std::move(loaded.value());
  }
  DeviceBuffer staging;
  auto put = [&](DeviceBuffer& dst, bool q, const char* name, int64_t rows, int64_t cols, const std::vector<float>* h,
                 RandomTensor t, int64_t layer) {
    return put_weight(dst, q, name, rows, cols, w ? h : nullptr, c, seed, t, layer, staging);
  };
  const bool proj = fp8.projections;
  TUNABLEOP_RETURN_IF_ERROR(put(embed_, false, "embed", V, H, w ? &w->embed : nullptr, RandomTensor::kEmbed, -1));
  TUNABLEOP_RETURN_IF_ERROR(
      put(final_norm_, false, "final_norm", 1, H, w ? &w->final_norm : nullptr, RandomTensor::kFinalNorm, -1));
  // An e4m3 lm_head of a tied model is a quantized copy of the embedding (which stays E).
  const bool tied = spec.builtin ? c.tie_word_embeddings : w->lm_head.empty();
  if (!tied || fp8.lm_head) {
    const std::vector<float>* head = w ? (tied ? &w->embed : &w->lm_head) : nullptr;
    TUNABLEOP_RETURN_IF_ERROR(
        put(lm_head_, fp8.lm_head, "lm_head", V, H, head, tied ? RandomTensor::kEmbed : RandomTensor::kLmHead, -1));
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights* h = w ? &w->layers[size_t(l)] : nullptr;
    Layer& d = layers_[size_t(l)];
    TUNABLEOP_RETURN_IF_ERROR(
        put(d.attn_norm, false, "attn_norm", 1, H, h ? &h->attn_norm : nullptr, RandomTensor::kAttnNorm, l));
    TUNABLEOP_RETURN_IF_ERROR(
        put(d.wqkv, proj, "wqkv", c.qkv_dim(), H, h ? &h->wqkv : nullptr, RandomTensor::kWqkv, l));
    TUNABLEOP_RETURN_IF_ERROR(put(d.wo, proj, "wo", H, c.q_dim(), h ? &h->wo : nullptr, RandomTensor::kWo, l));
    TUNABLEOP_RETURN_IF_ERROR(
        put(d.mlp_norm, false, "mlp_norm", 1, H, h ? &h->mlp_norm : nullptr, RandomTensor::kMlpNorm, l));
    TUNABLEOP_RETURN_IF_ERROR(
        put(d.w_gate_up, proj, "w_gate_up", 2 * I, H, h ? &h->w_gate_up : nullptr, RandomTensor::kGateUp, l));
    TUNABLEOP_RETURN_IF_ERROR(put(d.w_down, proj, "w_down", H, I, h ? &h->w_down : nullptr, RandomTensor::kDown, l));
    TUNABLEOP_RETURN_IF_ERROR(load_family(c, l, seed, h, staging));
  }
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  make_view(c, false);
  if (tied && fp8.lm_head) view_.lm_head = lm_head_.get();
  view_.bytes = c.parameter_count() * int64_t(esize_);
  if (!fp8.any()) return Status::ok();
  // fp8: as stored (what one decode step reads at least once; an e4m3 copy of a tied embedding
  // counted with it).
  view_.bytes = int64_t(embed_.bytes() + final_norm_.bytes() + lm_head_.bytes());
  for (const Layer& d : layers_) {
    view_.bytes += int64_t(d.attn_norm.bytes() + d.wqkv.bytes() + d.wo.bytes() + d.mlp_norm.bytes() +
                           d.w_gate_up.bytes() + d.w_down.bytes() + d.qkv_bias.bytes() + d.q_norm.bytes() +
                           d.k_norm.bytes() + d.post_attn_norm.bytes() + d.post_mlp_norm.bytes());
  }
  for (const auto& [weight, scales] : scales_) view_.bytes += int64_t(scales.bytes());
  return Status::ok();
}

Status CudaWeights::put_weight(DeviceBuffer& dst, bool fp8, const char* name, int64_t rows, int64_t cols,
                               const std::vector<float>* host, const ModelConfig& c, uint64_t seed, RandomTensor t,
                               int64_t layer, DeviceBuffer& staging) {
  if (!fp8) return host ? copy_weight(dst, *host, staging) : random_weight(dst, c, rows * cols, seed, t, layer);
  if (host) {  // the checkpoint's fp32 values, quantized once
    if (int64_t(host->size()) != rows * cols)
      return Status::internal(fmt::format("{}: {} values for a [{}, {}] weight", name, host->size(), rows, cols));
    TUNABLEOP_RETURN_IF_ERROR(::tunableop::cuda::upload(staging, host->data(), host->size() * 4, stream_));
    return quantize(dst, name, rows, cols, staging.get(), true);
  }
  DeviceBuffer generated;  // the E values the bf16 engine would hold
  TUNABLEOP_RETURN_IF_ERROR(random_weight(generated, c, rows * cols, seed, t, layer));
  return quantize(dst, name, rows, cols, generated.get(), false);
}

Status CudaWeights::quantize(DeviceBuffer& dst, const char* name, int64_t rows, int64_t cols, const void* src,
                             bool f32) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(rows * cols)));
  DeviceBuffer scales;
  TUNABLEOP_RETURN_IF_ERROR(scales.ensure(size_t(rows) * sizeof(float)));
  TUNABLEOP_CUDA_TRY(
      quantize_rows_fp8(e_, f32, src, rows, cols, dst.as<uint8_t>(), scales.as<float>(), stream_, /*pdl=*/false));
  // A non-finite weight leaves its row's scale NaN (llm/fp8_scale.h): refused here, named.
  std::vector<float> host(static_cast<size_t>(rows));
  TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(host.data(), scales.get(), host.size() * 4, cudaMemcpyDeviceToHost, stream_));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  for (size_t r = 0; r < host.size(); ++r) {
    if (std::isnan(host[r]))
      return Status::invalid_argument(
          fmt::format("--dtype fp8: weight {} row {} holds a NaN or an infinity: no fp8 scale represents it", name, r));
  }
  scales_.emplace(dst.get(), std::move(scales));
  return Status::ok();
}

const float* CudaWeights::fp8_scales(const void* w) const {
  const auto it = scales_.find(w);
  return it == scales_.end() ? nullptr : it->second.as<float>();
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
