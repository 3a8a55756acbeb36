#include "llm/parallel/tp_engine.h"

#include <string>

#include "llm/cpu/cpu_device.h"
#include "llm/engine_dtype.h"
#include "llm/model.h"
#include "llm/parallel/rank_threads.h"
#include "tunableop/all_reduce.h"

namespace tunableop::llm {
namespace {

class TpEngine final : public Engine {
 public:
  TpEngine(const ModelConfig& full, std::unique_ptr<Communicator> comm)
      : full_(full), comm_(std::move(comm)), threads_(comm_->world_size()), ranks_(size_t(comm_->world_size())) {}

  ~TpEngine() override {
    // Each rank's engine is torn down on its own thread (its GPU current there).
    (void)threads_.run([&](int r) {
      ranks_[size_t(r)].reset();
      return Status::ok();
    });
  }

  // Builds every rank's engine on its own thread (the GPUs load their shards at once).
  Status build(const std::function<StatusOr<std::unique_ptr<Engine>>(int rank, Communicator& comm)>& make_rank) {
    return on_every_rank([&](int r) -> Status {
      auto e = make_rank(r, *comm_);
      if (!e.is_ok()) return e.status();
      ranks_[size_t(r)] = std::move(e.value());
      return Status::ok();
    });
  }

  const ModelConfig& config() const override { return full_; }
  const EngineOptions& options() const override { return ranks_[0]->options(); }
  std::string device_name() const override {
    std::string s = "tensor parallel over " + std::to_string(ranks_.size()) + " ranks: ";
    for (size_t r = 0; r < ranks_.size(); ++r) s += (r ? " | " : "") + ranks_[r]->device_name();
    return s + "; all-reduce over " + comm_->describe();
  }
  LinearOp& linear() override { return ranks_[0]->linear(); }  // rank 0's GEMMs (every rank has the same problems)
  std::vector<int64_t> sequence_lengths() const override { return ranks_[0]->sequence_lengths(); }
  int64_t padded_prompt_length() const override { return ranks_[0]->padded_prompt_length(); }
  int64_t weight_bytes() const override {  // the whole model: what one step reads over all GPUs
    int64_t n = 0;
    for (const auto& e : ranks_) n += e->weight_bytes();
    return n;
  }

  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override {
    return step([&](Engine& e, std::vector<int32_t>* out) { return e.prefill(prompts, out); }, next);
  }
  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override {
    return step([&](Engine& e, std::vector<int32_t>* out) { return e.decode(tokens, out); }, next);
  }
  Status last_logits(std::vector<float>* out) override { return ranks_[0]->last_logits(out); }

  // The device loop (issue 30): each rank queues its step behind the previous one on its own
  // device (CUDA: one graph replay per GPU, inputs advanced by its argmax), and the host
  // collects every rank's tokens one step behind.
  bool decode_ahead_supported() const override { return ranks_[0]->decode_ahead_supported(); }
  Status decode_ahead(const std::vector<int32_t>* tokens) override {
    return on_every_rank([&](int r) { return ranks_[size_t(r)]->decode_ahead(tokens); });
  }
  Status collect_ahead(std::vector<int32_t>* next) override {
    return step([&](Engine& e, std::vector<int32_t>* out) { return e.collect_ahead(out); }, next);
  }

  // Continuous batching: every rank runs the same pass on its shard (each samples the same
  // tokens from the same gathered logits, which step() checks).
  Status prefill_slots(const std::vector<SlotChunk>& chunks, const SamplingRow* sampling,
                       std::vector<int32_t>* next) override {
    return step([&](Engine& e, std::vector<int32_t>* out) { return e.prefill_slots(chunks, sampling, out); }, next);
  }
  Status decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                      const SamplingRow* sampling, std::vector<int32_t>* next) override {
    return step([&](Engine& e, std::vector<int32_t>* out) { return e.decode_slots(slots, tokens, sampling, out); },
                next);
  }
  void release_slot(int64_t slot) override {
    for (auto& e : ranks_) e->release_slot(slot);
  }
  int64_t slot_length(int64_t slot) const override { return ranks_[0]->slot_length(slot); }
  std::vector<int64_t> decode_buckets() const override { return ranks_[0]->decode_buckets(); }
  int64_t slot_pages() const override { return ranks_[0]->slot_pages(); }
  void* stream() const override { return ranks_[0]->stream(); }
  Status warm_up_slots(const std::vector<int64_t>& prefill_rows) override {
    return on_every_rank([&](int r) { return ranks_[size_t(r)]->warm_up_slots(prefill_rows); });
  }

  // Every rank runs the profiled step (its collectives need every rank); rank 0's spans.
  StatusOr<std::vector<ProfileSpan>> profile_decode(const std::vector<int32_t>& tokens,
                                                    std::vector<int32_t>* next) override {
    std::vector<ProfileSpan> spans;
    TUNABLEOP_RETURN_IF_ERROR(step(
        [&](Engine& e, std::vector<int32_t>* out) -> Status {
          auto s = e.profile_decode(tokens, out);
          if (!s.is_ok()) return s.status();
          if (&e == ranks_[0].get()) spans = std::move(s.value());
          return Status::ok();
        },
        next));
    return spans;
  }
  // Every rank's device measured at once (each on its own thread, where its GPU is current): the
  // sum, the ranks' aggregate ceiling, which a decode step that reads every rank's weights at
  // once is held against.
  StatusOr<double> copy_bandwidth_gbps() override {
    std::vector<double> gbps(ranks_.size(), 0.0);
    TUNABLEOP_RETURN_IF_ERROR(threads_.run([&](int r) {
      auto g = ranks_[size_t(r)]->copy_bandwidth_gbps();
      if (!g.is_ok()) return g.status();
      gbps[size_t(r)] = *g;
      return Status::ok();
    }));
    double total = 0;
    for (double g : gbps) total += g;
    return total;
  }
  std::string kernel_choices() const override {
    std::string s;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const std::string c = ranks_[r]->kernel_choices();
      if (!c.empty()) s += "rank " + std::to_string(r) + ":\n" + c;
    }
    return s;
  }
  // Positions are every rank's (each holds its kv heads of every position); bytes are the sum.
  KvCacheStats kv_cache_stats() const override {
    KvCacheStats s = ranks_[0]->kv_cache_stats();
    for (size_t r = 1; r < ranks_.size(); ++r) {
      const KvCacheStats o = ranks_[r]->kv_cache_stats();
      s.allocated += o.allocated;
      s.bytes_per_position += o.bytes_per_position;
      s.static_bytes += o.static_bytes;
    }
    return s;
  }

 private:
  Status on_every_rank(const std::function<Status(int)>& job) {
    // A rank that fails releases the others from any rendezvous they wait in; once every rank
    // is back, the next step may meet there again (bad input fails on every rank alike).
    Status st = threads_.run(job, [this](const Status& e) { comm_->abort(e); });
    if (!st.is_ok()) comm_->clear_abort();
    return st;
  }

  // One step on every rank; every rank must have picked the same tokens.
  Status step(const std::function<Status(Engine&, std::vector<int32_t>*)>& f, std::vector<int32_t>* next) {
    std::vector<std::vector<int32_t>> picked(ranks_.size());
    TUNABLEOP_RETURN_IF_ERROR(on_every_rank([&](int r) { return f(*ranks_[size_t(r)], &picked[size_t(r)]); }));
    for (size_t r = 1; r < picked.size(); ++r) {
      if (picked[r] != picked[0]) {
        return Status::internal("tensor-parallel ranks 0 and " + std::to_string(r) +
                                " picked different tokens (their logits differ: an all-reduce gave different sums)");
      }
    }
    *next = std::move(picked[0]);
    return Status::ok();
  }

  ModelConfig full_;
  std::unique_ptr<Communicator> comm_;  // outlives the ranks, whose all-reduce uses it
  RankThreads threads_;
  std::vector<std::unique_ptr<Engine>> ranks_;
};

Status check_contexts(const std::vector<Context*>& contexts, DeviceKind kind) {
  if (contexts.size() < 2) return Status::invalid_argument("tensor parallelism needs at least 2 ranks");
  if (int(contexts.size()) > kMaxRanks)
    return Status::invalid_argument("tensor parallelism over at most " + std::to_string(kMaxRanks) + " ranks");
  for (Context* c : contexts)
    if (!c || c->device().kind != kind)
      return Status::invalid_argument("tensor parallelism: a rank has no context of the right device");
  return Status::ok();
}

}  // namespace

// Every rank passes its own context; rank 0's decides the all-reduces.
TensorParallelRank rank_parallelism(const TensorParallelLayout& layout, int r, Communicator& comm, Context& ctx,
                                    DeviceKernels& dev) {
  TensorParallelRank tp;
  tp.rank = r;
  tp.world = layout.world();
  tp.vocab_begin = layout.shard(r).vocab0;
  tp.vocab_rows = layout.shard(r).vocab;
  tp.all_reduce = [&comm, &ctx, &dev, r, world = layout.world()](const void* in, void* out, int64_t count) {
    AllReduceParams p;
    p.dtype = dev.dtype();
    p.count = count;
    p.world_size = world;
    return all_reduce(ctx, p, AllReduceOperands::for_rank(comm, r, in, out, dev.stream()));
  };
  tp.all_reduce_residual = [&comm, &ctx, &dev, r, world = layout.world()](const float* partial, float* residual,
                                                                          int64_t count, const void* prefetch,
                                                                          int64_t prefetch_bytes) {
    AllReduceParams p;
    p.dtype = DType::kF32;
    p.count = count;
    p.world_size = world;
    p.epilogue = AllReduceEpilogue::kAddResidual;
    p.round_to = dev.dtype();
    AllReduceOperands o = AllReduceOperands::for_rank(comm, r, partial, residual, dev.stream());
    o.prefetch[size_t(r)] = prefetch;
    o.prefetch_bytes[size_t(r)] = prefetch_bytes;
    return all_reduce(ctx, p, o);
  };
  return tp;
}

StatusOr<std::unique_ptr<Engine>> make_cpu_tp_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                     const std::vector<Context*>& contexts) {
  if (!weights) return Status::invalid_argument("make_cpu_tp_engine: no weights");
  TUNABLEOP_RETURN_IF_ERROR(refuse_fp8(options, "the tensor-parallel CPU engine"));
  TUNABLEOP_RETURN_IF_ERROR(check_contexts(contexts, DeviceKind::kCpu));
  TUNABLEOP_RETURN_IF_ERROR(prepare_engine_options(weights->config, weights->name, &options));
  const int world = int(contexts.size());
  auto layout = TensorParallelLayout::make(weights->config, world);
  if (!layout.is_ok()) return layout.status();
  auto comm = make_communicator(*contexts[0], std::vector<int>(size_t(world), 0));
  if (!comm.is_ok()) return comm.status();
  auto engine = std::make_unique<TpEngine>(weights->config, std::move(comm.value()));
  TUNABLEOP_RETURN_IF_ERROR(engine->build([&](int r, Communicator& c) -> StatusOr<std::unique_ptr<Engine>> {
    auto shard = std::make_shared<const ModelWeights>(shard_weights(*weights, *layout, r));
    std::unique_ptr<DeviceKernels> dev = make_cpu_device(shard, options.max_seq);
    dev->set_tensor_parallel(rank_parallelism(*layout, r, c, *contexts[size_t(r)], *dev));
    Context& ctx = *contexts[size_t(r)];
    return make_engine(std::move(dev), options, tunableop_linear(ctx), tunableop_gemm(ctx), tunableop_attention(ctx));
  }));
  return std::unique_ptr<Engine>(std::move(engine));
}

StatusOr<std::unique_ptr<Engine>> make_cuda_tp_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                      EngineOptions options, const std::vector<Context*>& contexts) {
  TUNABLEOP_RETURN_IF_ERROR(check_contexts(contexts, DeviceKind::kCuda));
  auto config = spec_config(spec, layers);
  if (!config.is_ok()) return config.status();
  TUNABLEOP_RETURN_IF_ERROR(
      prepare_engine_options(*config, spec.builtin ? "builtin:" + spec.preset : spec.dir, &options));
  const int world = int(contexts.size());
  auto layout = TensorParallelLayout::make(*config, world);
  if (!layout.is_ok()) return layout.status();
  auto shared_layout = std::make_shared<const TensorParallelLayout>(std::move(layout.value()));
  std::shared_ptr<const ModelWeights> host;
  if (!spec.builtin) {  // read once, cut by every rank
    auto w = load_model(spec.dir);
    if (!w.is_ok()) return w.status();
    host = std::make_shared<const ModelWeights>(std::move(w.value()));
  }
  std::vector<int> gpus;
  for (Context* c : contexts) gpus.push_back(c->device().ordinal);
  auto comm = make_communicator(*contexts[0], gpus);
  if (!comm.is_ok()) return comm.status();
  auto engine = std::make_unique<TpEngine>(*config, std::move(comm.value()));
  TUNABLEOP_RETURN_IF_ERROR(engine->build([&](int r, Communicator& c) -> StatusOr<std::unique_ptr<Engine>> {
    Context& ctx = *contexts[size_t(r)];
    auto dev = make_cuda_tp_device(spec, seed, options, ctx, shared_layout, r, host);
    if (!dev.is_ok()) return dev.status();
    (*dev)->set_tensor_parallel(rank_parallelism(*shared_layout, r, c, ctx, **dev));
    return make_engine(std::move(dev.value()), options, tunableop_linear(ctx), tunableop_gemm(ctx),
                       tunableop_attention(ctx));
  }));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace tunableop::llm
