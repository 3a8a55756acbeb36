// The CUDA device of the forward pass: weights, activations and KV cache in E (bf16 or fp32)
// with fp32 accumulation and an fp32 residual stream; kernels in kernels.cu on one stream;
// GEMMs through the model's LinearOp (tunableop on the context's GPU).
//
// Attention, prefill and decode, is the attention op on the device's stream (layer_attention.h:
// flash attention, cuDNN SDPA or split-KV decode, on a static or paged cache). Decode reads
// each sequence's length on the device, which lets the whole decode step be captured once as a
// CUDA graph and replayed.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <compare>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"
#include "llm/cuda/decode_fusion.h"
#include "llm/cuda/family_kernels.h"
#include "llm/cuda/fp8_projection.h"
#include "llm/cuda/graph_runner.h"
#include "llm/cuda/kernels.h"
#include "llm/cuda/prefill_gate.h"
#include "llm/cuda/row_parallel.h"
#include "llm/cuda/sampling.h"
#include "llm/cuda/weight_loader.h"
#include "llm/engine_limits.h"
#include "llm/layer_attention.h"
#include "llm/model.h"
#include "llm/parallel/shard_kernels.h"
#include "llm/parallel/tp_engine.h"
#include "llm/prefill_graphs.h"
#include "llm/rope.h"
#include "tunableop/fused_linear.h"
#include "tunableop/half.h"

namespace tunableop::llm {
namespace {

using ::tunableop::cuda::cuda_status;
using ::tunableop::cuda::DeviceBuffer;
using ::tunableop::cuda::GraphExec;
using ::tunableop::cuda::PinnedBuffer;
using ::tunableop::cuda::Stream;

class CudaKernels final : public DeviceKernels {
 public:
  // `tp`: one rank's shard of the model (its config is the rank's; see llm/parallel/tp_layout.h).
  CudaKernels(const ModelConfig& c, const EngineOptions& o, Context& ctx,
              std::shared_ptr<const TensorParallelLayout> tp = nullptr, int rank = 0)
      : DeviceKernels(tp ? tp->local_config(rank) : c),
        o_(o),
        ctx_(ctx),
        tp_(std::move(tp)),
        tp_rank_(rank),
        gate_(ctx) {}
  ~CudaKernels() override {
    for (cudaEvent_t e : download_events_) {
      if (e) cudaEventDestroy(e);
    }
  }

  // `host`: the full model's host weights for a tensor-parallel rank of a Hugging Face model
  // (loaded once for every rank); null otherwise.
  Status init(const ModelSpec& spec, uint64_t seed, const ModelWeights* host = nullptr) {
    if (o_.dtype != DType::kBF16 && o_.dtype != DType::kF32) {
      return Status::invalid_argument("the CUDA engine computes in bf16 or fp32");
    }
    if (o_.fp8.any() && o_.dtype != DType::kBF16)
      return Status::invalid_argument("--dtype fp8: the rest of the model (embedding, norms, KV cache) is bf16");
    if (o_.fp8.any() && tp_)
      return Status::unsupported("--dtype fp8 with tensor parallelism (--tp > 1) is not supported");
    e_ = o_.dtype == DType::kBF16 ? cuda::Elem::kBF16 : cuda::Elem::kF32;
    esize_ = dtype_size(o_.dtype);
    TUNABLEOP_RETURN_IF_ERROR(make_current());
    TUNABLEOP_RETURN_IF_ERROR(stream_.create());
    cudaDeviceProp prop{};
    TUNABLEOP_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx_.device().ordinal));
    device_desc_ = ctx_.device().to_string() + " (" + dtype_name(o_.dtype) +
                   (o_.fp8.any() ? std::string(o_.fp8.projections ? ", e4m3 projections" : "") + ", lm_head " +
                                       (o_.fp8.lm_head ? "e4m3" : dtype_name(o_.dtype))
                                 : std::string()) +
                   ", " + prop.name + ")";
    pdl_capable_ = o_.pdl && prop.major >= 9;
    variant_.pdl = pdl_capable_ ? 1 : 0;
    l2_bytes_ = prop.l2CacheSize;
    const ModelConfig& c = config();
    graphs_ = std::make_unique<cuda::GraphRunner>(
        ctx_, stream_.get(), variant_, pdl_capable_,
        fmt::format("{}_l{}_h{}_i{}_q{}_kv{}_d{}_v{}{}", architecture_name(c.arch), c.num_layers, c.hidden_size,
                    c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, feature_tag(c)),
        o_.dtype);
    gate_.init(stream_.get(), c.activation);
    TUNABLEOP_RETURN_IF_ERROR(scratch_.ensure(256));                                          // timing sinks
    TUNABLEOP_CUDA_TRY(cudaMemsetAsync(scratch_.get(), 0, scratch_.bytes(), stream_.get()));  // stream-ordered
    TUNABLEOP_RETURN_IF_ERROR(tp_ ? weights_.load_shard(spec, seed, *tp_, tp_rank_, host, e_, stream_.get())
                                  : weights_.load(spec, seed, config(), e_, stream_.get(), o_.fp8));
    view_ = weights_.view();
    if (tp_) TUNABLEOP_RETURN_IF_ERROR(row_gemm_.init(stream_.get()));
    RopeTable rope = make_rope_table(config(), o_.max_seq);  // the model's RoPE scaling (rope.h)
    TUNABLEOP_RETURN_IF_ERROR(
        ::tunableop::cuda::upload(rope_cos_, rope.cos.data(), rope.cos.size() * 4, stream_.get()));
    TUNABLEOP_RETURN_IF_ERROR(
        ::tunableop::cuda::upload(rope_sin_, rope.sin.data(), rope.sin.size() * 4, stream_.get()));
    return Status::ok();
  }

  std::string name() const override {
    return device_desc_ +
           (o_.cuda_graph ? (graphs_->decode_error().empty() ? ", CUDA graph decode"
                                                             : ", no CUDA graph: " + graphs_->decode_error())
                          : ", eager decode") +
           (prefill_graphs_on()                ? ", CUDA graph prefill"
            : graphs_->prefill_error().empty() ? ""
                                               : ", no prefill graph: " + graphs_->prefill_error()) +
           (launch_pdl() ? ", PDL" : "") +
           (o_.fusion == EngineOptions::Fusion::kOff  ? ", unfused"
            : o_.fusion == EngineOptions::Fusion::kOn ? ", fused projections"
                                                      : ", fused projections when tuned") +
           (o_.fusion != EngineOptions::Fusion::kOff ? ", step: " + variant_.name() : "");
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

  StatusOr<int64_t> free_memory_bytes() override {
    size_t free = 0, total = 0;
    TUNABLEOP_CUDA_TRY(cudaMemGetInfo(&free, &total));
    return int64_t(free);
  }

  Status embedding(const Pass& p, float scale, float* x) override {
    TUNABLEOP_CUDA_TRY(
        cuda::embedding(e_, p.ids, p.rows(), view_.embed, config().hidden_size, scale, x, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status rmsnorm(const float* x, const void* w, int64_t rows, void* out) override {
    const ModelConfig& c = config();
    TUNABLEOP_CUDA_TRY(cuda::rmsnorm(e_, x, w, rows, c.hidden_size, float(c.rms_norm_eps), c.norm_adds_one(), out,
                                     stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status add_residual(float* x, const void* y, int64_t rows) override {
    TUNABLEOP_CUDA_TRY(cuda::add_residual(e_, x, y, rows * config().hidden_size, stream_.get(), launch_pdl()));
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
      r.block_table = p.block_table ? p.block_table : pc.block_table();
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
    if (pending_bias_.y) {  // Qwen2's q/k/v biases, left by add_bias: added as the rows are read
      if (pending_bias_.y != qkv) return Status::internal("rope_kv: the biases left for it are not this pass's");
      r.qkv_bias = pending_bias_.bias;
      pending_bias_ = {};
    }
    if (pending_qkv_) {  // this pass's qkv, left by project()
      const Projection q = *pending_qkv_;
      pending_qkv_.reset();
      if (p.phase != Phase::kDecode || q.y != qkv || q.rows != p.rows())
        return Status::internal("rope_kv: the qkv projection left for it is not this decode pass's");
      return qkv_with_rope(q, r);
    }
    TUNABLEOP_CUDA_TRY(cuda::rope_store(e_, r, stream_.get(), launch_pdl()));
    return Status::ok();
  }

  // The qkv projection project() left for rope_kv (step variants with RoPE in qkv): one kernel,
  // RoPE and the cache write in its epilogue (FusedLinearRope). Where the op cannot take them,
  // the plain projection and rope_store.
  Status qkv_with_rope(const Projection& q, const cuda::RopeStoreArgs& r) {
    const FusedLinearPlan& plan = plans_.at(fmt_site(q));
    FusedLinearRope rope;
    rope.n_heads = r.n_heads;
    rope.n_kv_heads = r.n_kv_heads;
    rope.head_dim = r.head_dim;
    rope.seqs = r.seqs;
    rope.positions = r.positions;
    rope.cos = r.cos;
    rope.sin = r.sin;
    rope.k_cache = r.k_cache;
    rope.v_cache = r.v_cache;
    rope.max_seq = r.max_seq;
    rope.block_table = r.block_table;
    rope.page_size = r.page_size;
    rope.pages_per_seq = r.pages_per_seq;
    rope.seq_lens = r.seq_lens;
    rope.rows = variant_.rope_rows;
    rope.k_split = variant_.rope_k_split;
    FusedLinearOperands o = fused_operands(q);
    o.rope = &rope;
    Status st = plan.run(o);
    if (st.is_ok()) {
      if (profiling()) {
        mark(q.name, ("fused+rope:" + plan.solution()).c_str(), q.weight_bytes(esize_), true);
        rope_ran_in_qkv_ = true;  // the model's "rope_kv" mark next spans no kernel: dropped
      }
      return Status::ok();
    }
    ctx_.log().log(2, "llm: qkv with RoPE in its epilogue: " + st.to_string() + "; rope_kv runs on its own");
    TUNABLEOP_RETURN_IF_ERROR(plan.run(fused_operands(q)));
    if (profiling()) mark(q.name, ("fused:" + plan.solution()).c_str(), q.weight_bytes(esize_), true);
    TUNABLEOP_CUDA_TRY(cuda::rope_store(e_, r, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status attention(const Pass& p, int64_t layer, const void* qkv, KvCache& cache, LinearOp& linear,
                   void* out) override {
    auto a = layer_attention(config(), o_.dtype, p, layer, qkv, cache, out);
    if (!a.is_ok()) return a.status();
    a->operands.stream = stream_.get();
    if (p.phase == Phase::kDecode) TUNABLEOP_RETURN_IF_ERROR(prepare_decode_attention(a->params));
    return linear.attention(p.phase, a->params, a->operands);
  }
  Status gated_activation(const void* gate_up, int64_t rows, void* out) override {
    const Activation a = config().activation;
    const cuda::Act act = a == Activation::kSilu       ? cuda::Act::kSilu
                          : a == Activation::kGeluTanh ? cuda::Act::kGeluTanh
                                                       : cuda::Act::kGeluErf;
    TUNABLEOP_CUDA_TRY(
        cuda::gated_activation(e_, gate_up, rows, config().intermediate_size, act, out, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out) override {
    TUNABLEOP_CUDA_TRY(cuda::gather_rows(x, row_bytes, rows, count, out, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status argmax(const void* logits, int64_t rows, int32_t* out) override {
    TUNABLEOP_CUDA_TRY(cuda::argmax_rows(e_, logits, rows, config().vocab_size, out, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  // The families' ops (family_kernels.h). Qwen2's biases on the qkv rows are left for the
  // rope_kv that follows (model.cc calls nothing in between; Qwen3's head norms, when a model has
  // both, need them first): rope_store adds them as it reads the rows, one kernel less a layer.
  Status add_bias(void* y, const void* bias, int64_t rows, int64_t width) override {
    const ModelConfig& c = config();
    if (width == c.qkv_dim() && !c.qk_norm && !pending_bias_.y) {
      pending_bias_ = {y, bias};
      return Status::ok();
    }
    TUNABLEOP_CUDA_TRY(cuda::add_bias(e_, y, bias, rows, width, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status qk_norm(void* qkv, int64_t rows, const void* q_norm, const void* k_norm) override {
    const ModelConfig& c = config();
    TUNABLEOP_CUDA_TRY(cuda::qk_norm(e_, qkv, rows, c.qkv_dim(), c.num_heads, c.num_kv_heads, c.head_dim, q_norm,
                                     k_norm, float(c.rms_norm_eps), stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status add_normed_residual(float* x, const void* y, const void* w, int64_t rows) override {
    const ModelConfig& c = config();
    TUNABLEOP_CUDA_TRY(cuda::add_normed_residual(e_, x, y, w, rows, c.hidden_size, float(c.rms_norm_eps),
                                                 c.norm_adds_one(), stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status softcap(void* x, int64_t rows, int64_t width, float cap) override {
    TUNABLEOP_CUDA_TRY(cuda::softcap(e_, x, rows * width, cap, stream_.get(), launch_pdl()));
    return Status::ok();
  }
  Status sample(const void* logits, int64_t rows, const SamplingRow* params, int32_t* out) override {
    TUNABLEOP_CUDA_TRY(cuda::sample_rows(e_, logits, rows, config().vocab_size, params, out, stream_.get()));
    return Status::ok();
  }

  // Decode projections: the FusedLinear op (its shape tuned by TunableOp) where it beat the
  // unfused composition for this site, else the composition.
  // Tensor parallel: o and down write fp32 partial sums that the all-reduce sums, rounds once
  // and adds to the residual (row_parallel.h); never timed alone (collectives need every rank).
  Status project(const Projection& p, LinearOp& linear) override {
    if (const float* scales = weights_.fp8_scales(p.w))  // an e4m3 weight (--dtype fp8)
      return fp8_.project(p, linear, scales, *this, e_, stream_.get(), launch_pdl());
    if (p.row_parallel && tensor_parallel().world > 1) return project_row_parallel(p);
    if (p.epilogue == Projection::Epilogue::kAddResidual && p.next_norm) return add_and_norm_ahead(p, linear);
    if (p.epilogue == Projection::Epilogue::kGated && p.phase == Phase::kPrefill && !p.norm &&
        o_.dtype == DType::kBF16 && tensor_parallel().world == 1)
      return gate_up_prefill(p, linear);
    if (p.phase != Phase::kDecode || !fusion_on() || !variant_.fused) return DeviceKernels::project(p, linear);
    const std::string site = fmt_site(p);
    const cuda::FusionChoice* choice = fusion_.find(site);
    if (!choice) {
      auto made = choose(site, p, linear);
      if (!made.is_ok()) return made.status();
      choice = *made;
    }
    auto fused_ran = [choice] {  // timed successfully (the "every site" variants take it)
      return std::any_of(choice->timed.begin(), choice->timed.end(), [](const auto& t) { return t.fused; });
    };
    // RoPE in qkv (and "qkv fused"): qkv runs fused wherever its fused kernel runs (kOn:
    // untimed), also where the unfused composition was faster alone (a kernel less per layer may
    // be worth more).
    // fuse_on / fuse_off: this site forced either way (off: kAuto only, kOn keeps it fused).
    const unsigned bit = cuda::site_bit(p.name);
    const bool can_fuse = choice->best.fused || fused_ran();
    const bool off = (variant_.fuse_off & bit) && o_.fusion == EngineOptions::Fusion::kAuto;
    const bool qkv = (variant_.rope || variant_.qkv_fused) && bit == cuda::kSiteQkv && p.norm &&
                     p.epilogue == Projection::Epilogue::kStore && can_fuse && !off;
    // Biases or head norms come between qkv and RoPE: those models' "RoPE in qkv" variants run
    // qkv fused and rope_kv on its own (the FusedLinear epilogue has neither).
    const bool rope_in_qkv = variant_.rope && !config().qkv_bias && !config().qk_norm;
    if (qkv && rope_in_qkv) {
      pending_qkv_ = p;  // rope_kv runs it, with RoPE and the cache write in its epilogue
      return Status::ok();
    }
    const bool shaped = (variant_.shape_sites & bit) && fused_ran();
    const bool fused = !off && (choice->best.fused || qkv || shaped ||
                                ((variant_.every_site || (variant_.fuse_on & bit)) && fused_ran()));
    if (!fused) return DeviceKernels::project(p, linear);
    const FusedLinearPlan& plan = plans_.at(site);
    FusedLinearOperands o = fused_operands(p);
    if (shaped) o.rows = variant_.shape_rows, o.k_split = variant_.shape_k_split;
    Status st = plan.run(o);
    if (!st.is_ok() && shaped) {  // a shape not offered here: the tuned one
      o.rows = o.k_split = 0;
      st = plan.run(o);
    }
    TUNABLEOP_RETURN_IF_ERROR(st);
    if (profiling()) mark(p.name, ("fused:" + plan.solution()).c_str(), p.weight_bytes(esize_), true);
    return Status::ok();
  }

  Status project_row_parallel(const Projection& p) {
    if (p.epilogue != Projection::Epilogue::kAddResidual || !p.input)
      return Status::internal(std::string("row-parallel projection ") + p.name + " without a residual add");
    FusedLinearParams f = cuda::fused_linear_params(p, config(), o_.dtype);
    f.output = FusedOutput::kStoreF32;
    const bool fused = p.phase == Phase::kDecode && fusion_on() && p.rows <= kFusedLinearMaxTokens;
    std::string kernel;
    auto partial =
        row_gemm_.partial_sums(ctx_, p, o_.dtype, o_.max_batch, fused ? &f : nullptr, fused_operands(p), &kernel);
    if (!partial.is_ok()) return partial.status();
    mark(p.name, kernel.c_str(), p.weight_bytes(esize_), true);
    // L2-prefetch step variants: the head of the next weights while the all-reduce waits.
    const auto [next, next_bytes] =
        p.phase == Phase::kDecode && variant_.prefetch >= 1
            ? cuda::next_weights(view_, config(), p.w, tp_->lm_head(tp_rank_)[0].rows, esize_, int64_t(12) << 20)
            : std::pair<const void*, int64_t>{nullptr, 0};
    TUNABLEOP_RETURN_IF_ERROR(
        tensor_parallel().all_reduce_residual(*partial, p.residual, p.rows * p.out, next, next_bytes));
    mark(p.name, "all_reduce_residual");
    if (p.next_norm) {  // prefill: the next projection reads its rmsnorm from next_normed
      TUNABLEOP_RETURN_IF_ERROR(rmsnorm(p.residual, p.next_norm, p.rows, p.next_normed));
      mark(p.name, "next_norm");
    }
    return Status::ok();
  }

  // Prefill's o and down (issue 12): the GEMM, then the residual add and the next projection's
  // rmsnorm in one pass over the rows (the bits of add_residual + rmsnorm).
  Status add_and_norm_ahead(const Projection& p, LinearOp& linear) {
    const ModelConfig& c = config();
    if (p.out != c.hidden_size || p.norm) return DeviceKernels::project(p, linear);  // its checks and errors
    TUNABLEOP_RETURN_IF_ERROR(linear(p.phase, o_.dtype, p.rows, p.in, p.out, p.input, p.w, p.y, stream_.get()));
    if (p.row_parallel) TUNABLEOP_RETURN_IF_ERROR(after_row_parallel_linear(p.y, p.rows, p.out));
    mark(p.name, "gemm", p.weight_bytes(esize_), true, p.flops());
    TUNABLEOP_CUDA_TRY(cuda::add_rmsnorm(e_, p.residual, p.y, p.next_norm, p.rows, c.hidden_size, float(c.rms_norm_eps),
                                         c.norm_adds_one(), p.next_normed, stream_.get(), launch_pdl()));
    mark(p.name, "residual+norm", p.rows * c.hidden_size * (8 + 2 * int64_t(esize_)));
    return Status::ok();
  }

  // Prefill's gate_up through the prefill gate (prefill_gate.h): cuDNN's fused gate GEMM where it
  // was measured faster, else the composition.
  Status gate_up_prefill(const Projection& p, LinearOp& linear) {
    cuda::PrefillGate::Hooks h;
    h.unfused = [this](const Projection& q, LinearOp& l) { return DeviceKernels::project(q, l); };
    h.mark = [this](const char* label, const char* part, int64_t bytes, bool matmul, double flops) {
      mark(label, part, bytes, matmul, flops);
    };
    h.flush = [this]() -> StatusOr<std::pair<const void*, int64_t>> {
      TUNABLEOP_RETURN_IF_ERROR(flush_buffer());
      return std::pair<const void*, int64_t>{flush_.get(), int64_t(flush_.bytes())};
    };
    h.sink = flush_sink();
    h.timing = &timing_;
    return gate_.project(p, linear, fmt_site(p), h);
  }

  // The fused projections' choices and steps, then each decode attention problem's solution.
  std::string kernel_choices() const override {
    std::string s = fusion_.report() + graphs_->report() + gate_.report();
    for (const PreparedAttention& d : decode_attention_) {
      s += "decode attention " + attention_params_signature(d.params) + ": " + d.solution + "\n";
    }
    return s;
  }

  // Events around each span; the step is queued behind a busy kernel first, so each span is the
  // GPU's time for its kernels, not the host's launch rate.
  Status begin_profile() override {
    TUNABLEOP_RETURN_IF_ERROR(DeviceKernels::begin_profile());
    TUNABLEOP_CUDA_TRY(cuda::spin(20'000'000, stream_.get()));
    auto e = new_event();
    if (!e.is_ok()) return e.status();
    TUNABLEOP_CUDA_TRY(cudaEventRecord(*e, stream_.get()));
    return Status::ok();
  }
  StatusOr<std::vector<ProfileSpan>> end_profile() override {
    Status st = cuda_status(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
    for (size_t i = 0; st.is_ok() && i < spans_.size() && i + 1 < profile_events_.size(); ++i) {
      float ms = 0;
      st = cuda_status(cudaEventElapsedTime(&ms, profile_events_[i], profile_events_[i + 1]), "cudaEventElapsedTime");
      spans_[i].ms = ms;
    }
    for (cudaEvent_t e : profile_events_) cudaEventDestroy(e);
    profile_events_.clear();
    auto spans = DeviceKernels::end_profile();
    if (!st.is_ok()) return st;
    return spans;
  }

  // A device-to-device copy of 2 x 1 GiB (far past the L2): bytes read + written per second.
  StatusOr<double> copy_bandwidth_gbps() override {
    const size_t bytes = size_t(1) << 30;
    DeviceBuffer a, b;
    TUNABLEOP_RETURN_IF_ERROR(a.ensure(bytes));
    TUNABLEOP_RETURN_IF_ERROR(b.ensure(bytes));
    TUNABLEOP_CUDA_TRY(cudaMemsetAsync(a.get(), 1, bytes, stream_.get()));
    std::vector<std::function<Status()>> runs = {[&]() -> Status {
      TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream_.get()));
      return Status::ok();
    }};
    std::vector<double> us;
    TUNABLEOP_RETURN_IF_ERROR(
        cuda::DecodeFusion::time_candidates(runs, 7, a.get(), 16, flush_sink(), stream_.get(), &us));
    if (us.empty() || us[0] <= 0) return Status::device_error("copy bandwidth: no time measured");
    return 2.0 * double(bytes) / (us[0] * 1e-6) / 1e9;
  }

  // Prefill as a graph (issue 12): replaying the whole pass saves the host's launches, which
  // set a short prompt's pace (Gemma-2B, 128 tokens: 2.81 vs 3.19 ms on an H100) and are hidden
  // behind the GPU's work at 2048 tokens (no change there; stage9-prefill.md). When to run
  // eagerly, capture or replay: llm/prefill_graphs.h. Only with the static KV cache on one GPU:
  // a paged cache's block table and pages, and collectives over ranks, are not part of the shape.
  bool prefill_graphs_on() const {
    return o_.prefill_graph && graphs_->prefill_error().empty() && o_.kv_cache.kind == KvCacheKind::kStatic &&
           tensor_parallel().world == 1;
  }

  Status run_prefill(const Pass& p, LinearOp& linear, const std::function<Status()>& pass) override {
    const PrefillShape shape{p.batch, p.tokens, p.ragged, ctx_.config().snapshot().enabled};
    return graphs_->prefill(shape, linear, pass, prefill_graphs_on() && !profiling());
  }

  // How this device's decode steps are captured (graph_runner.h).
  cuda::GraphRunner::DecodePolicy decode_policy() const {
    cuda::GraphRunner::DecodePolicy d;
    d.graphs = o_.cuda_graph;
    // Not with tensor parallelism: each rank would time and keep its own variants, and a variant
    // that captures on one rank but not the other would leave their collectives unpaired.
    d.variants =
        o_.step_variant < 0 && o_.fusion == EngineOptions::Fusion::kAuto && fusion_on() && tensor_parallel().world == 1;
    d.forced = o_.step_variant;
    return d;
  }

  Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                         bool slot_table) override {
    const cuda::StepKey key{batch, ctx_.config().snapshot().enabled, slot_table};
    return graphs_->decode_step(key, linear, step, decode_policy());
  }

  // The device-side decode loop's step: the step and `advance` captured together (graph_runner.h).
  Status run_decode_step_ahead(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                               const std::function<Status()>& advance, int slot) override {
    const cuda::StepKey key{batch, ctx_.config().snapshot().enabled, false};
    return graphs_->decode_step_ahead(key, slot, linear, step, advance, decode_policy());
  }

  Status advance_decode(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens, int64_t batch,
                        int32_t* host_next) override {
    TUNABLEOP_CUDA_TRY(cuda::advance_decode(next, ids, positions, lens, batch, host_next, stream_.get(), launch_pdl()));
    return Status::ok();
  }

  Status download_async(void* dst, const void* src, size_t bytes, int slot) override {
    if (slot < 0 || slot >= int(std::size(download_events_))) return Status::invalid_argument("download_async: slot");
    cudaEvent_t& e = download_events_[slot];
    if (!e) TUNABLEOP_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (bytes) TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
    TUNABLEOP_CUDA_TRY(cudaEventRecord(e, stream_.get()));
    return Status::ok();
  }
  Status wait_download(int slot) override {
    if (slot < 0 || slot >= int(std::size(download_events_))) return Status::invalid_argument("wait_download: slot");
    if (download_events_[slot]) TUNABLEOP_CUDA_TRY(cudaEventSynchronize(download_events_[slot]));
    return Status::ok();
  }

 private:
  void record_mark(std::string label, int64_t bytes, bool matmul, double flops) override {
    if (timing_) return;  // a projection's first decode times its candidates: not the step's work
    if (rope_ran_in_qkv_ && label == "rope_kv") {  // RoPE ran in qkv's kernel: no row of its own
      rope_ran_in_qkv_ = false;
      return;
    }
    auto e = new_event();
    if (e.is_ok()) (void)cudaEventRecord(*e, stream_.get());
    spans_.push_back({std::move(label), 0, bytes, matmul, flops});
  }
  StatusOr<cudaEvent_t> new_event() {
    cudaEvent_t e = nullptr;
    TUNABLEOP_CUDA_TRY(cudaEventCreate(&e));
    profile_events_.push_back(e);
    return e;
  }

  // Fused projections: always (kOn), or with TunableOp on (kAuto, chosen by measurement).
  bool fusion_on() const {
    return o_.fusion == EngineOptions::Fusion::kOn ||
           (o_.fusion == EngineOptions::Fusion::kAuto && ctx_.config().snapshot().enabled);
  }

  std::string fmt_site(const Projection& p) const {
    return std::string(p.name) + " " + dtype_name(o_.dtype) + " " + std::to_string(p.out) + "x" + std::to_string(p.in) +
           " n" + std::to_string(p.rows);
  }

  FusedLinearOperands fused_operands(const Projection& p) {
    const ModelConfig& c = config();
    FusedLinearOperands o;
    o.w = p.w;
    o.input = p.input;
    o.x = p.x;
    o.norm = p.norm;
    o.y = p.y;
    o.residual = p.residual;
    o.gated = p.gated;
    o.ids = p.ids;
    o.stream = stream_.get();
    o.pdl = launch_pdl() ? variant_.pdl : 0;
    // L2 prefetch: the qkv kernel fetches o's weights (and the head of gate_up's) for after
    // RoPE and attention; lm_head fetches the next step's first qkv for after the host's turn.
    const std::string_view name = p.name;
    const int64_t layer = name == "qkv" ? layer_of(p.w) : -1;
    if ((variant_.prefetch == 1 || variant_.prefetch == 2) && layer >= 0) {
      const DeviceWeights::Layer& lw = view_.layers[size_t(layer)];
      o.prefetch[0] = lw.wo;
      o.prefetch_bytes[0] = c.hidden_size * c.q_dim() * int64_t(esize_);
      if (variant_.prefetch >= 2) {
        o.prefetch[1] = lw.w_gate_up;
        o.prefetch_bytes[1] =
            std::min<int64_t>(int64_t(16) << 20, 2 * c.intermediate_size * c.hidden_size * int64_t(esize_));
      }
    }
    if (variant_.prefetch >= 2 && name == "lm_head" && !view_.layers.empty()) {
      o.prefetch[0] = view_.layers[0].wqkv;
      o.prefetch_bytes[0] = c.qkv_dim() * c.hidden_size * int64_t(esize_);
    }
    return o;
  }

  // A projection's first decode: the FusedLinear op against the unfused composition. The op's
  // first run picks its shape (tuned, with TunableOp on, and kept in the results file; else its
  // Default). kOn then takes the op; kAuto times both (L2 evicted before each run, median of
  // several) and keeps the faster. Timing runs write a copy of the residual, so the step's state
  // is untouched; the unfused runs' GEMM calls are not counted. Where the op does not apply
  // (more than 8 tokens, a width it cannot load), the composition.
  StatusOr<const cuda::FusionChoice*> choose(const std::string& site, const Projection& p, LinearOp& linear) {
    static const cuda::FusionChoice unfused{{"unfused", false, 0}, {}};
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(stream_.get(), &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return &unfused;  // no tuning inside a graph; not kept
    auto plan = make_plan(ctx_, cuda::fused_linear_params(p, config(), o_.dtype));
    if (!plan.is_ok()) return &fusion_.set(site, unfused);
    plans_[site] = *plan;
    Projection q = p;
    FusedLinearOperands qo = fused_operands(p);
    if (p.epilogue == Projection::Epilogue::kAddResidual) {
      const size_t bytes = size_t(p.rows * p.out) * 4;
      TUNABLEOP_RETURN_IF_ERROR(tune_residual_.ensure(bytes));
      TUNABLEOP_CUDA_TRY(
          cudaMemcpyAsync(tune_residual_.get(), p.residual, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
      q.residual = qo.residual = tune_residual_.as<float>();
    }
    const auto before = linear.problems();
    timing_ = true;
    Status st = plan->run(qo);  // the op tunes here (or takes its Default)
    const cuda::FusionCandidate fused{"fused " + plan->solution(), true, 0};
    std::vector<cuda::FusionCandidate> cands = {unfused.best, fused};
    std::vector<double> us;
    const bool timed = st.is_ok() && o_.fusion != EngineOptions::Fusion::kOn;
    if (timed) {
      std::vector<std::function<Status()>> runs = {[this, &q, &linear] { return DeviceKernels::project(q, linear); },
                                                   [&plan, &qo] { return plan->run(qo); }};
      st = runs[0]();  // warm-up: the GEMM may tune here
      if (st.is_ok()) st = flush_buffer();
      if (st.is_ok()) {
        st = cuda::DecodeFusion::time_candidates(runs, 7, flush_.get(), int64_t(flush_.bytes()), flush_sink(),
                                                 stream_.get(), &us);
      }
    }
    timing_ = false;
    linear.add_calls(LinearOp::difference(before, linear.problems()), -1);  // timing, not the model's
    if (!st.is_ok()) {
      ctx_.log().warn("llm: " + site + ": the fused projection is not used: " + st.to_string());
      return &fusion_.set(site, unfused);
    }
    cuda::FusionChoice choice;
    choice.best = fused;
    if (timed) {
      cands[0].us = us[0];
      cands[1].us = us[1];
      if (cands[1].us < cands[0].us) std::swap(cands[0], cands[1]);
      choice.best = cands[0];
      choice.timed = std::move(cands);
    }
    return &fusion_.set(site, std::move(choice));
  }

  // A decode attention problem's first call (the first decode step, run eagerly): tuned at full
  // length before any graph of it is captured (tune_decode_attention), so split-KV, cuDNN or
  // Default is chosen for the positions the steps will read, and the capture only replays it.
  // Again only when the context changed since (settings, results): e.g. --compare's untuned
  // runs first, then the tuned ones.
  Status prepare_decode_attention(const AttentionParams& ap) {
    const AttentionParams p = ap.with_defaults();
    for (const PreparedAttention& d : decode_attention_) {
      if (d.params == p && d.generation == ctx_.generation()) return Status::ok();
    }
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(stream_.get(), &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return Status::ok();  // prepared by the eager step before
    auto chosen = tune_decode_attention(ctx_, p, stream_.get());
    if (!chosen.is_ok()) return chosen.status();
    auto same = [&p](const PreparedAttention& d) { return d.params == p; };
    auto it = std::find_if(decode_attention_.begin(), decode_attention_.end(), same);
    if (it == decode_attention_.end()) it = decode_attention_.insert(it, PreparedAttention{p, 0, ""});
    it->generation = ctx_.generation();
    it->solution = *chosen;
    return Status::ok();
  }

  // Twice the L2: reading it all evicts whatever the L2 held.
  Status flush_buffer() {
    const size_t bytes = size_t(std::max(l2_bytes_, 1 << 20)) * 2;
    if (flush_.bytes() >= bytes) return Status::ok();
    TUNABLEOP_RETURN_IF_ERROR(flush_.ensure(bytes));
    TUNABLEOP_CUDA_TRY(cudaMemsetAsync(flush_.get(), 0, bytes, stream_.get()));
    return Status::ok();
  }
  float* flush_sink() { return scratch_.as<float>(); }

  // The layer whose qkv weight this is (-1: none).
  int64_t layer_of(const void* wqkv) const {
    for (size_t l = 0; l < view_.layers.size(); ++l) {
      if (view_.layers[l].wqkv == wqkv) return int64_t(l);
    }
    return -1;
  }
  bool launch_pdl() const { return pdl_capable_ && variant_.pdl > 0; }

  EngineOptions o_;
  Context& ctx_;
  std::shared_ptr<const TensorParallelLayout> tp_;
  int tp_rank_ = 0;
  cuda::Elem e_ = cuda::Elem::kBF16;
  size_t esize_ = 2;
  Stream stream_;
  std::string device_desc_;
  cuda::CudaWeights weights_;
  cuda::Fp8Projections fp8_;  // projections over e4m3 weights (--dtype fp8)
  DeviceBuffer rope_cos_, rope_sin_;
  DeviceWeights view_;                   // weights_.view()
  cudaEvent_t download_events_[4] = {};  // download_async's ring
  bool pdl_capable_ = false, timing_ = false;
  cuda::StepVariant variant_;                  // how decode steps are built now (graph_runner.h chooses per step)
  std::unique_ptr<cuda::GraphRunner> graphs_;  // made in init(), once the stream exists
  std::optional<Projection> pending_qkv_;      // variant_.rope: qkv, run by the rope_kv after it
  struct PendingBias {
    void* y = nullptr;
    const void* bias = nullptr;
  } pending_bias_;                // add_bias: Qwen2's biases, added by the rope_kv after it
  bool rope_ran_in_qkv_ = false;  // profiling: the next "rope_kv" mark is dropped
  int l2_bytes_ = 0;
  cuda::DecodeFusion fusion_;
  DeviceBuffer scratch_;                           // zero: a timing sink and a 16-byte buffer the timer reads
  std::map<std::string, FusedLinearPlan> plans_;   // per decode projection site
  DeviceBuffer tune_residual_, flush_;             // fused-projection timing scratch
  cuda::RowParallelGemm row_gemm_;                 // tensor parallel: o and down, fp32 partial sums
  DeviceBuffer decode_partial_, prefill_partial_;  // their outputs
  std::set<std::string> row_unfused_;              // decode sites the fused kernel does not take
  cuda::PrefillGate gate_;                         // prefill's gate_up (prefill_gate.h); made in init()
  std::vector<cudaEvent_t> profile_events_;
  struct PreparedAttention {
    AttentionParams params;
    uint64_t generation = 0;  // the context's when prepared
    std::string solution;     // what tune_decode_attention chose
  };
  std::vector<PreparedAttention> decode_attention_;
};

}  // namespace

namespace {

Status check_cuda_context(const Context& ctx) {
  if (ctx.device().kind != DeviceKind::kCuda) return Status::invalid_argument("the CUDA engine needs a CUDA context");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= ctx.device().ordinal) {
    (void)cudaGetLastError();
    return Status::unsupported("no CUDA device " + std::to_string(ctx.device().ordinal) + " on this machine");
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<DeviceKernels>> make_cuda_tp_device(const ModelSpec& spec, uint64_t seed,
                                                             const EngineOptions& options, Context& ctx,
                                                             std::shared_ptr<const TensorParallelLayout> layout,
                                                             int rank, std::shared_ptr<const ModelWeights> host) {
  TUNABLEOP_RETURN_IF_ERROR(check_cuda_context(ctx));
  auto device = std::make_unique<CudaKernels>(layout->full(), options, ctx, layout, rank);
  TUNABLEOP_RETURN_IF_ERROR(device->init(spec, seed, host.get()));
  return std::unique_ptr<DeviceKernels>(std::move(device));
}

StatusOr<std::unique_ptr<Engine>> make_cuda_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                   EngineOptions options, Context& ctx) {
  TUNABLEOP_RETURN_IF_ERROR(check_cuda_context(ctx));
  auto c = spec_config(spec, layers);
  if (!c.is_ok()) return c.status();
  TUNABLEOP_RETURN_IF_ERROR(prepare_engine_options(*c, spec.builtin ? "builtin:" + spec.preset : spec.dir, &options));
  // Device memory is the runtime's to refuse; the sizes must still count without overflow.
  TUNABLEOP_RETURN_IF_ERROR(
      check_engine_fits(*c, options, options.dtype == DType::kF32 ? 4 : 2, /*host_memory=*/false));
  // fp8: the decode projections' fused bf16 kernels and the prefill's norm computed ahead (in
  // bf16, for the next projection) do not apply: each projection quantizes its own input.
  if (options.fp8.any()) options.fusion = EngineOptions::Fusion::kOff;
  auto device = std::make_unique<CudaKernels>(*c, options, ctx);
  TUNABLEOP_RETURN_IF_ERROR(device->init(spec, seed));
  auto engine =
      make_engine(std::move(device), options, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  if (engine.is_ok()) (*engine)->linear().set_scaled(tunableop_scaled_linear(ctx));
  return engine;
}

}  // namespace tunableop::llm
