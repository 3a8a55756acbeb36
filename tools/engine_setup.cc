#include "engine_setup.h"

#include <fmt/format.h>

#include "llm/parallel/process_tp.h"
#include "llm/parallel/tp_layout.h"
#include "llm/random_model.h"
#include "llm/weights.h"
#include "llm_tp.h"

namespace tunableop::cli {

void apply_tunableop_flags(Context& ctx, bool tune, bool no_tune, int verbose) {
  if (verbose >= 0) (void)ctx.config().set(Setting::kVerbose, verbose);
  if (tune) {
    (void)ctx.config().set(Setting::kEnabled, true);
    (void)ctx.config().set(Setting::kTuning, true);
  } else if (no_tune) {
    (void)ctx.config().set(Setting::kEnabled, false);  // the seed's untuned baseline: Default everywhere
  }
}

StatusOr<std::unique_ptr<TpLaunch>> TpLaunch::start(const char* command, int tp) {
  const MpiLaunch launch = mpi_launch();
  TUNABLEOP_RETURN_IF_ERROR(check_tp_launch(command, tp, launch, built_with_mpi()));
  auto t = std::make_unique<TpLaunch>();
  if (launch.size > 1) {
    auto s = MpiSession::start();
    if (!s.is_ok()) return s.status();
    t->mpi_ = std::move(s.value());
  }
  return t;
}

TpLaunch::~TpLaunch() {
  if (mpi_ && mpi_->rank() == 0 && !built_) (void)llm::cancel_process_tp(mpi_->calls());
}

Device TpLaunch::device(bool cuda, int gpu) const {
  if (!cuda) return Device::cpu();
  return Device::cuda(gpu + (mpi_ ? mpi_->local_rank() : 0));
}

StatusOr<std::unique_ptr<llm::Engine>> build_engine(
    const llm::ModelSpec& spec, uint64_t model_seed, int64_t layers, int tp, const llm::EngineOptions& options,
    Context& ctx, const std::function<Status(const llm::ModelWeights&)>& on_cpu_weights, TpLaunch* launch,
    const std::function<Status(const llm::ModelConfig&, int)>& on_cpu_rank) {
  if (launch && launch->multi_process()) {  // each rank holds its shard only: on_cpu_weights has no whole model to see
    if (ctx.device().kind == DeviceKind::kCpu && on_cpu_rank) {
      // Before any rank loads (a failure here cancels the followers: TpLaunch's destructor).
      auto c = llm::spec_config(spec, layers);
      if (!c.is_ok()) return c.status();
      auto layout = llm::TensorParallelLayout::make(*c, launch->mpi()->size());
      if (!layout.is_ok()) return layout.status();
      TUNABLEOP_RETURN_IF_ERROR(on_cpu_rank(layout->local_config(0), launch->mpi()->local_size()));
    }
    launch->built();  // the followers meet it in make_process_tp_engine from here on
    auto e = llm::make_process_tp_engine(spec, model_seed, layers, options, ctx, launch->mpi()->calls(),
                                         launch->mpi()->data());
    if (!e.is_ok()) return e.status();
    return std::unique_ptr<llm::Engine>(std::move(e.value()));
  }
  if (ctx.device().kind == DeviceKind::kCuda) {
    if (tp > 1) return make_cli_tp_engine(tp, spec, model_seed, layers, options, ctx, nullptr);
    return llm::make_cuda_engine(spec, model_seed, layers, options, ctx);
  }
  auto w = llm::load_or_generate(spec, model_seed, layers);
  if (!w.is_ok()) return w.status();
  if (on_cpu_weights) TUNABLEOP_RETURN_IF_ERROR(on_cpu_weights(*w));
  auto shared = std::make_shared<const llm::ModelWeights>(std::move(w.value()));
  if (tp > 1) return make_cli_tp_engine(tp, spec, model_seed, layers, options, ctx, shared);
  return llm::make_cpu_engine(shared, options, llm::tunableop_linear(ctx), llm::tunableop_gemm(ctx),
                              llm::tunableop_attention(ctx));
}

int follow_leader(const char* command, const llm::ModelSpec& spec, uint64_t model_seed, int64_t layers, Context& ctx,
                  const TpLaunch& launch) {
  const int rank = launch.mpi()->rank();
  auto e = llm::make_process_tp_engine(spec, model_seed, layers, llm::EngineOptions{}, ctx, launch.mpi()->calls(),
                                       launch.mpi()->data());
  if (!e.is_ok()) return 2;  // every rank has the same error: rank 0 prints it
  Status st = (*e)->follow();
  if (st.is_ok()) return 0;
  fmt::print(stderr, "tunableop {}: tensor-parallel rank {}: {}\n", command, rank, st.message());
  return 3;
}

std::string describe_model(const std::string& name, const llm::ModelConfig& c) {
  return fmt::format("{} ({}, {} layers, hidden {}, {} heads / {} kv heads, vocab {}, {:.1f}M parameters)", name,
                     llm::architecture_name(c.arch), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads,
                     c.vocab_size, double(c.parameter_count()) / 1e6);
}

StatusOr<std::unique_ptr<llm::Tokenizer>> load_model_tokenizer(const llm::ModelSpec& spec, const std::string& model,
                                                               int64_t vocab_size) {
  if (spec.builtin) {
    return Status::not_found(model +
                             " has no tokenizer: text prompts need a Hugging Face model directory with a "
                             "tokenizer.json or tokenizer.model");
  }
  auto t = llm::load_tokenizer(spec.dir);
  if (!t.is_ok()) return t.status();
  if ((*t)->vocab_size() > vocab_size) {
    return Status::invalid_argument(
        fmt::format("the tokenizer has {} ids but {}/config.json's vocab_size is {}: not this model's tokenizer ({})",
                    (*t)->vocab_size(), spec.dir, vocab_size, (*t)->description()));
  }
  return std::move(t.value());
}

}  // namespace tunableop::cli
