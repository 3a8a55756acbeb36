// Building an engine from the command line's model options: what `tunableop llm` and
// `tunableop serve` share (the model named by --model, its device and tensor parallelism,
// TunableOp's --tune/--no-tune, the description printed before a run, the tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm/text/tokenizer.h"
#include "mpi_group.h"
#include "tunableop/context.h"

namespace tunableop::cli {

// --tune: TunableOp on with tuning; --no-tune: off (Default everywhere: the seed's untuned
// baseline); neither: the environment decides. verbose >= 0 overrides TUNABLEOP_VERBOSE.
void apply_tunableop_flags(Context& ctx, bool tune, bool no_tune, int verbose);

// How `llm` and `serve` run their ranks (issue 30): one process (one device, or --tp N ranks
// driven by threads), or under `mpirun -np N ... --tp N` one rank per process, MPI started
// here. Rank 0 leads: it builds the engine the command drives (every call it gets runs on every
// rank); the others follow (follow_leader) and print nothing but their own failures.
class TpLaunch {
 public:
  // Checks --tp against the launch (mpi_group.h) and starts MPI when it spans processes.
  static StatusOr<std::unique_ptr<TpLaunch>> start(const char* command, int tp);
  // Rank 0 that never built its engine (it failed first) releases the followers waiting for it.
  ~TpLaunch();
  bool multi_process() const { return mpi_ != nullptr; }
  bool follower() const { return mpi_ && mpi_->rank() > 0; }
  // This process's device: --gpu plus its rank among the processes on this host.
  Device device(bool cuda, int gpu) const;
  MpiSession* mpi() const { return mpi_.get(); }
  void built() { built_ = true; }

 private:
  std::unique_ptr<MpiSession> mpi_;
  bool built_ = false;
};

// The engine of `spec` on ctx's device: the CPU (weights loaded or generated here; `on_cpu_weights`,
// when given, sees them first: --save-model), CUDA, or `tp` ranks of either; under a
// multi-process launch this process's rank (rank 0's engine: the leader; no whole model is in
// memory there, so on_cpu_weights is not called; on_cpu_rank is, on the CPU, before any rank
// loads: one rank's model and the number of ranks on this host).
StatusOr<std::unique_ptr<llm::Engine>> build_engine(
    const llm::ModelSpec& spec, uint64_t model_seed, int64_t layers, int tp, const llm::EngineOptions& options,
    Context& ctx, const std::function<Status(const llm::ModelWeights&)>& on_cpu_weights = {},
    TpLaunch* launch = nullptr,
    const std::function<Status(const llm::ModelConfig& rank_config, int ranks_here)>& on_cpu_rank = {});

// A follower of a multi-process launch: builds this process's rank (the options are rank 0's)
// and runs rank 0's calls until rank 0's engine ends; the exit code (its own failures printed,
// naming `command` and the rank).
int follow_leader(const char* command, const llm::ModelSpec& spec, uint64_t model_seed, int64_t layers, Context& ctx,
                  const TpLaunch& launch);

// "builtin:tiny (llama, 4 layers, hidden 512, 8 heads / 2 kv heads, vocab 8192, 19.5M parameters)"
std::string describe_model(const std::string& name, const llm::ModelConfig& c);

// DIR's tokenizer, refused when it has more pieces than the model's vocabulary (another
// model's tokenizer). `model` is the --model argument, for messages.
StatusOr<std::unique_ptr<llm::Tokenizer>> load_model_tokenizer(const llm::ModelSpec& spec, const std::string& model,
                                                               int64_t vocab_size);

}  // namespace tunableop::cli
