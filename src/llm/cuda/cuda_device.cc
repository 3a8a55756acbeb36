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
#include "llm/cuda/cudnn_gate.h"
#include "llm/cuda/decode_fusion.h"
#include "llm/cuda/kernels.h"
#include "llm/cuda/row_parallel.h"
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

struct LayerBuffers {
  DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
};

class CudaKernels final : public DeviceKernels {
 public:
  // `tp`: one rank's shard of the model (its config is the rank's; see llm/parallel/tp_layout.h).
  CudaKernels(const ModelConfig& c, const EngineOptions& o, Context& ctx,
              std::shared_ptr<const TensorParallelLayout> tp = nullptr, int rank = 0)
      : DeviceKernels(tp ? tp->local_config(rank) : c), o_(o), ctx_(ctx), tp_(std::move(tp)), tp_rank_(rank) {}
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
    e_ = o_.dtype == DType::kBF16 ? cuda::Elem::kBF16 : cuda::Elem::kF32;
    esize_ = dtype_size(o_.dtype);
    TUNABLEOP_RETURN_IF_ERROR(make_current());
    TUNABLEOP_RETURN_IF_ERROR(stream_.create());
    cudaDeviceProp prop{};
    TUNABLEOP_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx_.device().ordinal));
    device_desc_ = ctx_.device().to_string() + " (" + dtype_name(o_.dtype) + ", " + prop.name + ")";
    pdl_capable_ = o_.pdl && prop.major >= 9;
    variant_.pdl = pdl_capable_ ? 1 : 0;
    l2_bytes_ = prop.l2CacheSize;
    TUNABLEOP_RETURN_IF_ERROR(scratch_.ensure(256));  // timing sinks
    TUNABLEOP_CUDA_TRY(cudaMemset(scratch_.get(), 0, scratch_.bytes()));
    const int64_t hd = config().head_dim;
    TUNABLEOP_RETURN_IF_ERROR(tp_ ? load_shard(spec, seed, host) : load_weights(spec, seed));
    if (tp_) TUNABLEOP_RETURN_IF_ERROR(row_gemm_.init(stream_.get()));
    RopeTable rope = make_rope_table(hd, config().rope_theta, o_.max_seq);
    TUNABLEOP_RETURN_IF_ERROR(copy_to_device(rope_cos_, rope.cos.data(), rope.cos.size() * 4));
    TUNABLEOP_RETURN_IF_ERROR(copy_to_device(rope_sin_, rope.sin.data(), rope.sin.size() * 4));
    return Status::ok();
  }

  std::string name() const override {
    return device_desc_ +
           (o_.cuda_graph ? (graph_error_.empty() ? ", CUDA graph decode" : ", no CUDA graph: " + graph_error_)
                          : ", eager decode") +
           (prefill_graphs_on()            ? ", CUDA graph prefill"
            : prefill_graph_error_.empty() ? ""
                                           : ", no prefill graph: " + prefill_graph_error_) +
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

  // Decode projections: the FusedLinear op (its shape tuned by TunableOp) where it beat the
  // unfused composition for this site, else the composition.
  // Tensor parallel: o and down write fp32 partial sums that the all-reduce sums, rounds once
  // and adds to the residual (row_parallel.h); never timed alone (collectives need every rank).
  Status project(const Projection& p, LinearOp& linear) override {
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
    if (qkv && variant_.rope) {
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
    FusedLinearParams f = fused_params(p);
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

  // Prefill's gate_up (issue 12), two ways, chosen per site by measurement with TunableOp on:
  //  - "gemm+gated" (Default): the gate_up GEMM (the GEMM op), then the gated kernel (reads 2n
  //    columns, writes n);
  //  - "cudnn_gate": the up-half GEMM (the GEMM op, n columns), then cuDNN's gate GEMM with the
  //    activation and the product with `up` in its epilogue (cudnn_gate.h): the 2n-wide
  //    intermediate is never written or read. Every engine configuration cuDNN offers is a
  //    candidate.
  // The choice is a problem of its own in the results file (op PrefillGateTunableOp_BFloat16,
  // solution "Default" or "Cudnn<version>_<configuration tag>"): a later process reads it back
  // without timing. A miss with tuning on times gemm+gated, the up GEMM alone and the up GEMM +
  // each configuration (L2 evicted, interleaved, median of 7); a configuration whose output on
  // sampled rows is not within 2e-2 of gemm+gated's is dropped. The gate GEMM's flops are counted
  // with the prefill's GEMMs (problem PrefillGateTunableOp_BFloat16, the gate half's flops).
  // TUNABLEOP_LLM_PREFILL_GATE_CUDNN: auto (the default) as above; off: gemm+gated; on: cuDNN's
  // gate (the results' configuration, else the first that builds; tests). Where cuDNN is absent
  // or cannot run the graph the engine says so once and keeps gemm+gated.
  static constexpr const char* kGateOp = "PrefillGateTunableOp_BFloat16";
  Status gate_up_prefill(const Projection& p, LinearOp& linear) {
    auto chosen = prefill_gate_choice(p, linear);
    if (!chosen.is_ok()) return chosen.status();
    if (chosen->empty()) return DeviceKernels::project(p, linear);
    return gate_cudnn(p, linear, *chosen);
  }
  cuda::Act gate_act() const {
    const Activation a = config().activation;
    return a == Activation::kSilu       ? cuda::Act::kSilu
           : a == Activation::kGeluTanh ? cuda::Act::kGeluTanh
                                        : cuda::Act::kGeluErf;
  }
  std::string gate_params(const Projection& p) const {
    const Activation a = config().activation;
    const char* act = a == Activation::kSilu ? "silu" : a == Activation::kGeluTanh ? "gelu_tanh" : "gelu_erf";
    return fmt::format("{}_n{}_m{}_k{}", act, p.out / 2, p.rows, p.in);
  }
  // The up-half GEMM alone (timing).
  Status gate_up_gemm(const Projection& p, LinearOp& linear) {
    const int64_t n = p.out / 2;
    const void* w_up = static_cast<const char*>(p.w) + size_t(n * p.in) * esize_;
    // up [rows, n] in the first half of y (the gate_up scratch): the GEMM op, tuned as its own problem.
    TUNABLEOP_RETURN_IF_ERROR(linear(p.phase, o_.dtype, p.rows, p.in, n, p.input, w_up, p.y, stream_.get()));
    mark(p.name, "up_gemm", p.weight_bytes(esize_) / 2, true, p.flops() / 2);
    return Status::ok();
  }
  Status gate_cudnn(const Projection& p, LinearOp& linear, const std::string& tag) {
    TUNABLEOP_RETURN_IF_ERROR(gate_up_gemm(p, linear));
    const int64_t n = p.out / 2;
    TUNABLEOP_RETURN_IF_ERROR(
        cudnn_gate_.run(stream_.get(), gate_act(), p.rows, p.in, n, p.input, p.w, p.y, p.gated, tag));
    LinearOp::Problem gate{kGateOp,
                           gate_params(p),
                           p.phase == Phase::kPrefill,
                           p.phase == Phase::kDecode,
                           1,
                           p.phase == Phase::kPrefill ? 1 : 0,
                           p.flops() / 2};
    linear.add_calls({gate}, 1);  // the gate GEMM's flops in the GEMM tally
    mark(p.name, "gate_cudnn", p.weight_bytes(esize_) / 2, true, p.flops() / 2);
    return Status::ok();
  }
  // Up to 32 rows of p.gated, spread over the rows, as floats (the numerics check).
  StatusOr<std::vector<float>> gated_sample(const Projection& p) {
    const int64_t n = p.out / 2, take = std::min<int64_t>(p.rows, 32), step = p.rows / take;
    std::vector<bf16> h(size_t(take * n));
    TUNABLEOP_CUDA_TRY(cudaMemcpy2DAsync(h.data(), size_t(n) * 2, p.gated, size_t(step * n) * 2, size_t(n) * 2,
                                         size_t(take), cudaMemcpyDeviceToHost, stream_.get()));
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = to_float(h[i]);
    return f;
  }
  // The cuDNN configuration tag for site p ("": gemm+gated); see gate_up_prefill.
  StatusOr<std::string> prefill_gate_choice(const Projection& p, LinearOp& linear) {
    const char* env = std::getenv("TUNABLEOP_LLM_PREFILL_GATE_CUDNN");
    const std::string force = env && *env ? env : "auto";
    if (force == "off") return std::string();
    if (force != "on" && !ctx_.options().enabled) return std::string();  // TunableOp off: Default
    const std::string site = fmt_site(p);
    if (auto it = prefill_gate_.find(site); it != prefill_gate_.end()) return it->second.tag;
    const Options opt = ctx_.config().snapshot();
    GateChoice& choice = prefill_gate_[site];
    const cuda::Act act = gate_act();
    const int64_t n = p.out / 2;
    const std::string params = gate_params(p);
    const std::string prefix = fmt::format("Cudnn{}_", cuda::CudnnGate::version());
    // The results file's choice, when it is this cuDNN's and its configuration still builds.
    if (opt.enabled) {
      if (auto e = ctx_.results().lookup(kGateOp, params)) {
        if (e->solution == "Default" && force != "on") {
          choice.how = "results file";
          return std::string();
        }
        if (e->solution.rfind(prefix, 0) == 0) {
          const std::string tag = e->solution.substr(prefix.size());
          if (cudnn_gate_.configs(act, p.rows, p.in, n, tag).is_ok()) {
            choice.tag = tag;
            choice.how = "results file";
            return tag;
          }
        }
      }
    }
    auto tags = cudnn_gate_.configs(act, p.rows, p.in, n, "", force == "on" ? 1 : 0);
    if (!tags.is_ok()) {
      ctx_.log().warn("llm: " + site + ": cuDNN's fused gate GEMM not used: " + tags.status().to_string());
      choice.how = "cuDNN: " + tags.status().message();
      return std::string();
    }
    if (force == "on") {
      choice.tag = tags->front();
      choice.how = "forced";
      return choice.tag;
    }
    if (!opt.tuning) {  // a miss with tuning off: Default, as the GEMM op does
      choice.how = "not in the results, tuning off";
      return std::string();
    }
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(stream_.get(), &capturing));
    if (capturing != cudaStreamCaptureStatusNone) {  // no timing inside a graph; not kept
      prefill_gate_.erase(site);
      return std::string();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto before = linear.problems();
    timing_ = true;
    // Warm-up and numerics: gemm+gated's output on sampled rows, then each configuration's.
    Status st = DeviceKernels::project(p, linear);  // the GEMMs may tune here
    std::vector<float> want;
    if (st.is_ok()) {
      auto s = gated_sample(p);
      st = s.status();
      if (s.is_ok()) want = std::move(*s);
    }
    std::vector<std::string> ok_tags;
    for (size_t i = 0; st.is_ok() && i < tags->size(); ++i) {
      Status r = gate_cudnn(p, linear, (*tags)[i]);
      double err = 1;
      if (r.is_ok()) {
        auto got = gated_sample(p);
        if (!got.is_ok()) {
          st = got.status();
          break;
        }
        double num = 0, den = 0;
        for (size_t j = 0; j < want.size(); ++j) {
          const double d = double((*got)[j]) - want[j];
          num += std::isfinite(d) ? d * d : 1e30;
          den += double(want[j]) * want[j];
        }
        err = std::sqrt(num / std::max(den, 1e-30));
      }
      if (r.is_ok() && err < 2e-2) {
        ok_tags.push_back((*tags)[i]);
      } else {
        ++choice.rejected;
        ctx_.log().warn(fmt::format("llm: {}: cuDNN gate configuration {} dropped: {}", site, (*tags)[i],
                                    r.is_ok() ? fmt::format("relative error {:.2e}", err) : r.to_string()));
      }
    }
    std::vector<std::function<Status()>> runs = {[this, &p, &linear] { return DeviceKernels::project(p, linear); },
                                                 [this, &p, &linear] { return gate_up_gemm(p, linear); }};
    for (const std::string& tag : ok_tags)
      runs.push_back([this, &p, &linear, tag] { return gate_cudnn(p, linear, tag); });
    std::vector<double> us;
    if (st.is_ok() && !ok_tags.empty()) st = flush_buffer();
    if (st.is_ok() && !ok_tags.empty()) {
      st = cuda::DecodeFusion::time_candidates(runs, 7, flush_.get(), int64_t(flush_.bytes()), flush_sink(),
                                               stream_.get(), &us);
    }
    if (st.is_ok()) st = DeviceKernels::project(p, linear);  // p.gated as the model needs it
    timing_ = false;
    linear.add_calls(LinearOp::difference(before, linear.problems()), -1);  // timing, not the model's
    TUNABLEOP_RETURN_IF_ERROR(st);
    choice.how = "timed";
    if (us.size() != runs.size()) {  // no configuration computed it right
      cudnn_gate_.keep_only(act, p.rows, p.in, n, "");
      return std::string();
    }
    choice.us_default = us[0];
    choice.us_up = us[1];
    size_t best = 0;
    for (size_t i = 0; i < ok_tags.size(); ++i) {
      choice.timed.emplace_back(ok_tags[i], us[i + 2]);
      if (us[i + 2] < us[best + 2]) best = i;
    }
    choice.us_best = us[best + 2];
    if (choice.us_best < choice.us_default) choice.tag = ok_tags[best];
    cudnn_gate_.keep_only(act, p.rows, p.in, n, choice.tag);  // the losers' plans are not kept
    ResultEntry e;
    e.op = kGateOp;
    e.params = params;
    e.solution = choice.tag.empty() ? "Default" : prefix + choice.tag;
    // The gate alone (the path minus the up GEMM), so that "tuned alone" reads as the gate's rate.
    e.time_ms = choice.tag.empty() ? 0 : std::max(choice.us_best - choice.us_up, 0.0) / 1e3;
    e.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    e.note = fmt::format("gemm+gated {:.1f} us, up GEMM + cuDNN gate {:.1f} us", choice.us_default, choice.us_best);
    if (Status saved = ctx_.store_result(e, true); !saved.is_ok())
      ctx_.log().warn("llm: " + site + ": the gate choice not saved: " + saved.to_string());
    return choice.tag;
  }

  // The fused projections' choices and steps, then each decode attention problem's solution.
  std::string kernel_choices() const override {
    std::string s = fusion_.report();
    for (const auto& [site, ch] : prefill_gate_) {
      s += fmt::format("prefill gate {}: {} ({}", site, ch.tag.empty() ? "gemm+gated" : "cudnn_gate " + ch.tag, ch.how);
      if (ch.us_default > 0) {
        s += fmt::format("; gemm+gated {:.1f} us, up GEMM {:.1f} us, up GEMM + cuDNN gate:", ch.us_default, ch.us_up);
        for (const auto& [tag, us] : ch.timed) s += fmt::format(" {} {:.1f}", tag, us);
        if (ch.rejected) s += fmt::format("; {} configurations dropped (numerics or errors)", ch.rejected);
      }
      s += ")\n";
    }
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
  // eagerly, capture or replay: llm/prefill_graphs.h. Inputs (ids, positions, lengths, the last
  // rows) live in buffers the graph reads, uploaded before each launch. Only with the static KV
  // cache on one GPU: a paged cache's block table and pages, and collectives over ranks, are not
  // part of the shape.
  bool prefill_graphs_on() const {
    return o_.prefill_graph && prefill_graph_error_.empty() && o_.kv_cache.kind == KvCacheKind::kStatic &&
           tensor_parallel().world == 1;
  }

  Status run_prefill(const Pass& p, LinearOp& linear, const std::function<Status()>& pass) override {
    if (!prefill_graphs_on() || profiling()) return pass();
    const bool enabled = ctx_.config().snapshot().enabled;
    const PrefillShape shape{p.batch, p.tokens, p.ragged, enabled};
    auto version = [&] { return enabled ? ctx_.results().version() : uint64_t(0); };
    switch (prefill_graphs_.next(shape, version())) {
      case PrefillGraphs<Graph>::Action::kEager:
        TUNABLEOP_RETURN_IF_ERROR(pass());
        prefill_graphs_.ran_eagerly(shape, version());
        return Status::ok();
      case PrefillGraphs<Graph>::Action::kCapture: {
        auto g = capture_graph(linear, pass);
        if (!g.is_ok()) {  // nothing ran: run it eagerly, and prefill stays eager from now on
          prefill_graph_error_ = g.status().message();
          ctx_.log().warn("llm: prefill runs without a CUDA graph: " + g.status().to_string());
          prefill_graphs_.clear();
          return pass();
        }
        prefill_graphs_.captured(shape, std::move(g.value()));
        break;
      }
      case PrefillGraphs<Graph>::Action::kReplay: break;
    }
    return replay(prefill_graphs_.graph(shape), linear);
  }

  // A graph holds the GEMM solutions chosen when it was captured: one per batch size and
  // TunableOp on/off (the comparison benchmark flips it between runs). A tuned graph captured
  // before the results changed (a new tuning, the in-context check switching choices) holds
  // stale choices: it is captured again.
  Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step) override {
    const bool enabled = ctx_.config().snapshot().enabled;
    const std::pair<int64_t, bool> key{batch, enabled};
    const uint64_t results = enabled ? ctx_.results().version() : 0;
    if (auto it = graphs_.find(key); it != graphs_.end() && it->second.results != results) graphs_.erase(it);
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      return replay(it->second, linear);
    }
    // First step of this kind runs eagerly: any tuning, workspace growth or attribute setup
    // happens here, outside capture. Then the step is captured for the next ones. With the
    // fused projections tuned (TunableOp on), one graph per step variant, timed as whole steps.
    const auto all = cuda::step_variants(pdl_capable_);
    // Not with tensor parallelism: each rank would time and keep its own variants, and a
    // variant that captures on one rank but not the other would leave their collectives unpaired.
    const bool variants = o_.step_variant < 0 && o_.cuda_graph && graph_error_.empty() &&
                          o_.fusion == EngineOptions::Fusion::kAuto && fusion_on() && tensor_parallel().world == 1;
    if (variants) variant_ = cuda::StepVariant{true, pdl_capable_ ? 1 : 0, 0};  // the sites choose here
    if (o_.step_variant >= 0) variant_ = all[std::min(size_t(o_.step_variant), all.size() - 1)];
    TUNABLEOP_RETURN_IF_ERROR(step());
    if (variants) return choose_step_variant(key, linear, step);
    if (o_.cuda_graph && graph_error_.empty()) capture(key, linear, step);
    return Status::ok();
  }

  // The device-side decode loop's step: the step and `advance` captured together, with the step
  // variant of run_decode_step's graph for the same key (chosen there, where replays of the step
  // alone are idempotent and may be timed; replays of this graph move the inputs on). The first
  // step of a key runs as run_decode_step (eager, choosing and capturing its graph) followed by
  // `advance` alone; the graph of both is captured then, for the next steps.
  Status run_decode_step_ahead(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                               const std::function<Status()>& advance, int slot) override {
    const bool enabled = ctx_.config().snapshot().enabled;
    const std::pair<int64_t, bool> key{batch, enabled};
    const std::tuple<int64_t, bool, int> ahead_key{batch, enabled, slot};  // advance writes the slot's host tokens
    const uint64_t results = enabled ? ctx_.results().version() : 0;
    if (auto it = ahead_graphs_.find(ahead_key); it != ahead_graphs_.end() && it->second.results != results) {
      ahead_graphs_.erase(it);
    }
    if (auto it = ahead_graphs_.find(ahead_key); it != ahead_graphs_.end()) {
      return replay(it->second, linear);
    }
    TUNABLEOP_RETURN_IF_ERROR(run_decode_step(batch, linear, step));
    TUNABLEOP_RETURN_IF_ERROR(advance());
    auto plain = graphs_.find(key);
    if (!o_.cuda_graph || !graph_error_.empty() || plain == graphs_.end()) return Status::ok();
    const cuda::StepVariant now = variant_;
    variant_ = plain->second.variant;
    auto g = capture_graph(linear, [&]() -> Status {
      TUNABLEOP_RETURN_IF_ERROR(step());
      return advance();
    });
    variant_ = now;
    if (!g.is_ok()) {  // the step alone captured: keep its graph, run this loop eagerly
      ctx_.log().warn("llm: the decode loop's step runs without a CUDA graph: " + g.status().to_string());
      return Status::ok();
    }
    ahead_graphs_[ahead_key] = std::move(g.value());
    return Status::ok();
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

  // The projection as a FusedLinear problem (its input and output kinds from the model's config).
  FusedLinearParams fused_params(const Projection& p) const {
    using E = Projection::Epilogue;
    const ModelConfig& c = config();
    FusedLinearParams f;
    f.dtype = o_.dtype;
    f.out = p.out;
    f.in = p.in;
    f.tokens = p.rows;
    f.input = !p.norm ? FusedInput::kPlain : c.norm_adds_one() ? FusedInput::kRmsNormPlusOne : FusedInput::kRmsNorm;
    f.eps = c.rms_norm_eps;
    f.output = p.epilogue == E::kStore                 ? FusedOutput::kStore
               : p.epilogue == E::kAddResidual         ? FusedOutput::kAddResidual
               : p.epilogue == E::kArgmax              ? FusedOutput::kArgmax
               : c.activation == Activation::kSilu     ? FusedOutput::kGatedSilu
               : c.activation == Activation::kGeluTanh ? FusedOutput::kGatedGeluTanh
                                                       : FusedOutput::kGatedGeluErf;
    return f;
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
    auto plan = make_plan(ctx_, fused_params(p));
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

  struct Graph {
    GraphExec exec;
    std::vector<LinearOp::Problem> calls, attention_calls;
    uint64_t results = 0;       // the results' version it was captured with (0: TunableOp off)
    cuda::StepVariant variant;  // how its step was built
  };

  // Launches a captured graph and credits `linear` with the GEMMs and attention calls it ran.
  Status replay(const Graph& g, LinearOp& linear) {
    TUNABLEOP_RETURN_IF_ERROR(g.exec.launch(stream_.get()));
    linear.add_calls(g.calls, 1);
    linear.add_attention_calls(g.attention_calls, 1);
    return Status::ok();
  }

  // Captures one decode step for `key`. A failure (a GEMM solution that cannot be captured,
  // say) turns graphs off for this engine with the reason in name(); decode goes on eagerly.
  // The GEMMs a replay runs are not called through LinearOp: the calls made while capturing
  // are kept and credited to it on each replay.
  void capture(const std::pair<int64_t, bool>& key, LinearOp& linear, const std::function<Status()>& step) {
    auto g = capture_graph(linear, step);
    if (!g.is_ok()) {
      graph_error_ = g.status().message();
      ctx_.log().warn("llm: decode runs without a CUDA graph: " + g.status().to_string());
      return;
    }
    graphs_[key] = std::move(g.value());
  }

  StatusOr<Graph> capture_graph(LinearOp& linear, const std::function<Status()>& step) {
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
      return st;
    }
    g.calls = captured;
    g.attention_calls = attention_captured;
    g.results = ctx_.config().snapshot().enabled ? ctx_.results().version() : 0;
    g.variant = variant_;
    return g;
  }

  // One graph per step variant, each replayed a few times (a decode step replays identically:
  // same inputs, same cache slot), the fastest median kept; the others are dropped.
  Status choose_step_variant(const std::pair<int64_t, bool>& key, LinearOp& linear,
                             const std::function<Status()>& step) {
    std::vector<cuda::StepVariant> ok;
    std::vector<Graph> graphs;
    std::string error;
    for (const cuda::StepVariant& v : cuda::step_variants(pdl_capable_)) {
      variant_ = v;
      auto g = capture_graph(linear, step);
      if (!g.is_ok()) {
        error = v.name() + ": " + g.status().message();
        continue;
      }
      ok.push_back(v);
      graphs.push_back(std::move(g.value()));
    }
    if (graphs.empty()) {
      graph_error_ = error;
      ctx_.log().warn("llm: decode runs without a CUDA graph: " + error);
      return Status::ok();
    }
    std::vector<std::function<Status()>> runs;
    for (const Graph& g : graphs) runs.push_back([&g, this] { return g.exec.launch(stream_.get()); });
    for (auto& run : runs) TUNABLEOP_RETURN_IF_ERROR(run());  // first launches upload the graphs
    std::vector<double> us;
    TUNABLEOP_RETURN_IF_ERROR(
        cuda::DecodeFusion::time_candidates(runs, 7, scratch_.as<char>() + 16, 16, flush_sink(), stream_.get(), &us));
    // Second pass: the fastest few again, more runs each. The minimum of ~40 noisy medians is
    // biased low (on the H100, identical configurations spread over ~10 us of a ~1940 us step),
    // so the first pass only shortlists.
    std::vector<size_t> order(ok.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t finalists = std::min<size_t>(6, order.size());
    std::partial_sort(order.begin(), order.begin() + finalists, order.end(),
                      [&us](size_t a, size_t b) { return us[a] < us[b]; });
    size_t best = order[0];
    std::vector<bool> again(ok.size(), false);
    if (finalists > 1) {
      std::vector<std::function<Status()>> finals;
      for (size_t i = 0; i < finalists; ++i) finals.push_back(runs[order[i]]);
      std::vector<double> us2;
      TUNABLEOP_RETURN_IF_ERROR(cuda::DecodeFusion::time_candidates(finals, 15, scratch_.as<char>() + 16, 16,
                                                                    flush_sink(), stream_.get(), &us2));
      for (size_t i = 0; i < finalists; ++i) us[order[i]] = us2[i], again[order[i]] = true;
      for (size_t i = 1; i < finalists; ++i) {
        if (us[order[i]] < us[best]) best = order[i];
      }
    }
    std::vector<std::pair<cuda::StepVariant, double>> timed;
    for (size_t i = 0; i < ok.size(); ++i) timed.emplace_back(ok[i], us[i]);
    fusion_.set_step(key.first, timed, best, again);
    variant_ = ok[best];
    graphs_[key] = std::move(graphs[best]);
    return Status::ok();
  }

  // The layer whose qkv weight this is (-1: none).
  int64_t layer_of(const void* wqkv) const {
    for (size_t l = 0; l < view_.layers.size(); ++l) {
      if (view_.layers[l].wqkv == wqkv) return int64_t(l);
    }
    return -1;
  }
  bool launch_pdl() const { return pdl_capable_ && variant_.pdl > 0; }

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

  // Tensor parallel: only this rank's blocks of each tensor (tp_layout.h), generated on the GPU
  // with the full model's values (built-in models) or cut from the full model's host weights.
  Status load_shard(const ModelSpec& spec, uint64_t seed, const ModelWeights* host) {
    const ModelConfig& full = tp_->full();
    const int64_t H = full.hidden_size, V = full.vocab_size;
    if (!spec.builtin && !host)
      return Status::internal("a tensor-parallel rank of a model directory needs its weights");
    DeviceBuffer staging;
    auto whole = [](int64_t rows, int64_t cols) { return std::vector<TensorBlock>{{0, rows, 0, cols, cols}}; };
    auto put = [&](DeviceBuffer& dst, RandomTensor t, int64_t layer, const std::vector<float>* src,
                   const std::vector<TensorBlock>& blocks) -> Status {
      if (host) return copy_weight(dst, take_blocks(*src, blocks), staging);
      TUNABLEOP_RETURN_IF_ERROR(dst.ensure(size_t(shard_elements(blocks)) * esize_));
      const RandomInit init = random_init(full, t);
      size_t at = 0;
      for (const TensorBlock& b : blocks) {
        TUNABLEOP_CUDA_TRY(cuda::fill_random_block(e_ == cuda::Elem::kBF16, dst.as<char>() + at * esize_, b.rows,
                                                   b.cols, b.full_cols, b.row0, b.col0, seed, random_stream(t, layer),
                                                   init.scale, init.offset, stream_.get()));
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
        put(lm_head_, tied ? RandomTensor::kEmbed : RandomTensor::kLmHead, -1, head, tp_->lm_head(tp_rank_)));
    layers_.resize(size_t(full.num_layers));
    for (int64_t l = 0; l < full.num_layers; ++l) {
      const LayerWeights* h = host ? &host->layers[size_t(l)] : nullptr;
      LayerBuffers& d = layers_[size_t(l)];
      TUNABLEOP_RETURN_IF_ERROR(put(d.attn_norm, RandomTensor::kAttnNorm, l, h ? &h->attn_norm : nullptr, whole(1, H)));
      TUNABLEOP_RETURN_IF_ERROR(put(d.wqkv, RandomTensor::kWqkv, l, h ? &h->wqkv : nullptr, tp_->wqkv(tp_rank_)));
      TUNABLEOP_RETURN_IF_ERROR(put(d.wo, RandomTensor::kWo, l, h ? &h->wo : nullptr, tp_->wo(tp_rank_)));
      TUNABLEOP_RETURN_IF_ERROR(put(d.mlp_norm, RandomTensor::kMlpNorm, l, h ? &h->mlp_norm : nullptr, whole(1, H)));
      TUNABLEOP_RETURN_IF_ERROR(
          put(d.w_gate_up, RandomTensor::kGateUp, l, h ? &h->w_gate_up : nullptr, tp_->gate_up(tp_rank_)));
      TUNABLEOP_RETURN_IF_ERROR(put(d.w_down, RandomTensor::kDown, l, h ? &h->w_down : nullptr, tp_->down(tp_rank_)));
    }
    TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_.get()));
    view_.embed = embed_.get();
    view_.final_norm = final_norm_.get();
    view_.lm_head = lm_head_.get();
    view_.bytes = int64_t(embed_.bytes() + final_norm_.bytes() + lm_head_.bytes());
    for (const LayerBuffers& d : layers_) {
      view_.layers.push_back(
          {d.attn_norm.get(), d.wqkv.get(), d.wo.get(), d.mlp_norm.get(), d.w_gate_up.get(), d.w_down.get()});
      view_.bytes += int64_t(d.attn_norm.bytes() + d.wqkv.bytes() + d.wo.bytes() + d.mlp_norm.bytes() +
                             d.w_gate_up.bytes() + d.w_down.bytes());
    }
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
  std::shared_ptr<const TensorParallelLayout> tp_;
  int tp_rank_ = 0;
  cuda::Elem e_ = cuda::Elem::kBF16;
  size_t esize_ = 2;
  Stream stream_;
  std::string device_desc_, graph_error_;
  DeviceBuffer embed_, final_norm_, lm_head_, rope_cos_, rope_sin_;
  std::vector<LayerBuffers> layers_;
  DeviceWeights view_;
  std::map<std::pair<int64_t, bool>, Graph> graphs_;
  PrefillGraphs<Graph> prefill_graphs_;
  std::string prefill_graph_error_;  // why prefill graphs are off (a capture failed), else empty
  std::map<std::tuple<int64_t, bool, int>, Graph> ahead_graphs_;  // run_decode_step_ahead's: step + advance, per slot
  cudaEvent_t download_events_[4] = {};                           // download_async's ring
  bool pdl_capable_ = false, timing_ = false;
  cuda::StepVariant variant_;              // how decode steps are built now (see choose_step_variant)
  std::optional<Projection> pending_qkv_;  // variant_.rope: qkv, run by the rope_kv after it
  bool rope_ran_in_qkv_ = false;           // profiling: the next "rope_kv" mark is dropped
  int l2_bytes_ = 0;
  cuda::DecodeFusion fusion_;
  DeviceBuffer scratch_;                           // zero: a timing sink and a 16-byte buffer the timer reads
  std::map<std::string, FusedLinearPlan> plans_;   // per decode projection site
  DeviceBuffer tune_residual_, flush_;             // fused-projection timing scratch
  cuda::RowParallelGemm row_gemm_;                 // tensor parallel: o and down, fp32 partial sums
  DeviceBuffer decode_partial_, prefill_partial_;  // their outputs
  std::set<std::string> row_unfused_;              // decode sites the fused kernel does not take
  struct GateChoice {
    std::string tag;                                    // cuDNN's configuration; empty: gemm+gated
    std::string how;                                    // "timed", "results file", "forced", or why cuDNN was not used
    double us_default = 0, us_up = 0, us_best = 0;      // gemm+gated, the up GEMM alone, the best cuDNN path
    std::vector<std::pair<std::string, double>> timed;  // up GEMM + each configuration's gate
    int rejected = 0;
  };
  std::map<std::string, GateChoice> prefill_gate_;  // per prefill gate_up site
  cuda::CudnnGate cudnn_gate_;
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
  auto device = std::make_unique<CudaKernels>(*c, options, ctx);
  TUNABLEOP_RETURN_IF_ERROR(device->init(spec, seed));
  return make_engine(std::move(device), options, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
}

}  // namespace tunableop::llm
