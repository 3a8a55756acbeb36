#include "llm_tp.h"

#include <fmt/format.h>

#include <vector>

#include "llm/parallel/process_tp.h"
#include "llm/parallel/tp_engine.h"
#include "tunableop/registry.h"

namespace tunableop::cli {
namespace {

// The engine plus the contexts of ranks 1.., which must outlive it (declared first, so they
// die after it).
class CliTpEngine final : public llm::Engine {
 public:
  CliTpEngine(std::vector<std::unique_ptr<Context>> ranks, std::unique_ptr<llm::Engine> engine)
      : ranks_(std::move(ranks)), engine_(std::move(engine)) {}
  ~CliTpEngine() override { engine_.reset(); }
  const llm::ModelConfig& config() const override { return engine_->config(); }
  const llm::EngineOptions& options() const override { return engine_->options(); }
  std::string device_name() const override { return engine_->device_name(); }
  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override {
    return engine_->prefill(prompts, next);
  }
  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override {
    return engine_->decode(tokens, next);
  }
  // The device loop (--decode-loop device, the default on CUDA): without these the wrapper
  // answered "not supported" and `llm --tp N` decoded with the host loop.
  bool decode_ahead_supported() const override { return engine_->decode_ahead_supported(); }
  Status decode_ahead(const std::vector<int32_t>* tokens) override { return engine_->decode_ahead(tokens); }
  Status collect_ahead(std::vector<int32_t>* next) override { return engine_->collect_ahead(next); }
  Status last_logits(std::vector<float>* out) override { return engine_->last_logits(out); }
  StatusOr<std::vector<llm::ProfileSpan>> profile_prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                          std::vector<int32_t>* next, double* host_ms) override {
    return engine_->profile_prefill(prompts, next, host_ms);
  }
  StatusOr<std::vector<llm::ProfileSpan>> profile_decode(const std::vector<int32_t>& tokens,
                                                         std::vector<int32_t>* next) override {
    return engine_->profile_decode(tokens, next);
  }
  StatusOr<double> copy_bandwidth_gbps() override { return engine_->copy_bandwidth_gbps(); }
  std::string kernel_choices() const override { return engine_->kernel_choices(); }
  std::vector<int64_t> sequence_lengths() const override { return engine_->sequence_lengths(); }
  int64_t padded_prompt_length() const override { return engine_->padded_prompt_length(); }
  int64_t weight_bytes() const override { return engine_->weight_bytes(); }
  llm::KvCacheStats kv_cache_stats() const override { return engine_->kv_cache_stats(); }
  llm::LinearOp& linear() override { return engine_->linear(); }
  // The continuous-batch calls (`tunableop serve --tp`).
  Status prefill_slots(const std::vector<SlotChunk>& chunks, const llm::SamplingRow* sampling,
                       std::vector<int32_t>* next) override {
    return engine_->prefill_slots(chunks, sampling, next);
  }
  Status decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                      const llm::SamplingRow* sampling, std::vector<int32_t>* next) override {
    return engine_->decode_slots(slots, tokens, sampling, next);
  }
  void release_slot(int64_t slot) override { engine_->release_slot(slot); }
  int64_t slot_length(int64_t slot) const override { return engine_->slot_length(slot); }
  std::vector<int64_t> decode_buckets() const override { return engine_->decode_buckets(); }
  int64_t slot_pages() const override { return engine_->slot_pages(); }
  void* stream() const override { return engine_->stream(); }
  Status warm_up_slots(const std::vector<int64_t>& prefill_rows) override {
    return engine_->warm_up_slots(prefill_rows);
  }
  const std::vector<std::unique_ptr<Context>>& ranks() const { return ranks_; }

 private:
  std::vector<std::unique_ptr<Context>> ranks_;
  std::unique_ptr<llm::Engine> engine_;
};

}  // namespace

std::unique_ptr<llm::Engine> keep_rank_contexts(std::vector<std::unique_ptr<Context>> ranks,
                                                std::unique_ptr<llm::Engine> engine) {
  return std::make_unique<CliTpEngine>(std::move(ranks), std::move(engine));
}

StatusOr<std::unique_ptr<llm::Engine>> make_cli_tp_engine(int tp, const llm::ModelSpec& spec, uint64_t seed,
                                                          int64_t layers, const llm::EngineOptions& options,
                                                          Context& ctx,
                                                          std::shared_ptr<const llm::ModelWeights> weights) {
  if (tp < 2) return Status::invalid_argument(fmt::format("--tp {}: tensor parallelism needs at least 2 ranks", tp));
  if (ctx.device().kind == DeviceKind::kCpu) {
    return llm::make_cpu_tp_engine(std::move(weights), options, std::vector<Context*>(size_t(tp), &ctx));
  }
  const DeviceRuntime* rt = ctx.registry().runtime(DeviceKind::kCuda);
  const int count = rt ? rt->device_count() : 0, first = ctx.device().ordinal;
  if (first + tp > count)
    return Status::invalid_argument(fmt::format("--tp {} from --gpu {} needs GPUs {}..{}; this machine has {}", tp,
                                                first, first, first + tp - 1, count));
  std::vector<std::unique_ptr<Context>> ranks;
  std::vector<Context*> all = {&ctx};
  for (int r = 1; r < tp; ++r) {
    ranks.push_back(std::make_unique<Context>(Device::cuda(first + r), ctx.config()));
    all.push_back(ranks.back().get());
  }
  auto e = llm::make_cuda_tp_engine(spec, seed, layers, options, all);
  if (!e.is_ok()) return e.status();
  return keep_rank_contexts(std::move(ranks), std::move(e.value()));
}

void set_tunableop_mode(llm::Engine& engine, Context& ctx, bool tuned) {
  if (auto* p = dynamic_cast<llm::ProcessTpEngine*>(&engine)) {  // every process's context, through rank 0's calls
    (void)p->set_tunableop(tuned);
    return;
  }
  std::vector<Context*> all = {&ctx};
  if (auto* tp = dynamic_cast<CliTpEngine*>(&engine))
    for (const auto& c : tp->ranks()) all.push_back(c.get());
  for (Context* c : all) {
    (void)c->config().set(Setting::kEnabled, tuned);
    if (tuned) (void)c->config().set(Setting::kTuning, true);
  }
}

}  // namespace tunableop::cli
