// Tensor parallelism over processes (issue 30): each process of a ProcessGroup (MPI ranks,
// `mpirun -np N tunableop llm|serve --tp N`) holds one rank: its shard of the model on its own
// device (read or generated as the shard only), an ordinary engine over it, and a process-mode
// all-reduce communicator that joins the ranks. Rank 0 leads: the engine the command drives is
// rank 0's ProcessTpEngine, which sends every call that runs the model (prefill, decode, the slot
// calls, warm-up, profiles, the bandwidth measurement, TunableOp's mode) to the other ranks
// before it runs the call itself; they sit in follow() and run each call on their rank. The
// model's collectives pair up because every rank runs the same calls in the same order.
//
// After each call every rank reports its status and a digest of the tokens it picked (one small
// all-gather): rank 0 returns the first failing rank's error (every rank failed alike: the
// next call may run, as with bad input in one process) or a mismatch of the tokens. A rank that
// failed on its own while the others wait inside a collective waits `fail_timeout_s` for them
// and then ends the job (ProcessGroup::abort), so no rank hangs.
#pragma once

#include <memory>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "tunableop/context.h"
#include "tunableop/process_group.h"

namespace tunableop::llm {

class ProcessTpEngine : public Engine {
 public:
  // How long a rank whose call failed waits for the others' reports before it ends the job.
  static constexpr double kFailTimeoutS = 30;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Ranks > 0: runs rank 0's calls until rank 0's engine is destroyed (ok) or the group fails.
  virtual Status follow() = 0;
  // Rank 0: TunableOp on (with tuning) or off on every rank's context (--compare).
  virtual Status set_tunableop(bool tuned) = 0;
};

// This process's rank of `spec` over `group` on ctx's device (CPU: fp32, the shard in host
// memory; CUDA: the shard generated or uploaded on the GPU). `group` joins the engines' calls;
// `data` (the same processes; another communicator, so that the model's collectives never meet
// the calls' messages) carries the all-reduce. Collective: every rank gets its engine or every
// rank the same error. `group`, `data` and ctx must outlive the engine.
StatusOr<std::unique_ptr<ProcessTpEngine>> make_process_tp_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                                  EngineOptions options, Context& ctx,
                                                                  ProcessGroup& group, ProcessGroup& data);

// Rank 0 failed before it called make_process_tp_engine: the other ranks, waiting there, get
// an error instead of waiting forever.
Status cancel_process_tp(ProcessGroup& group);

// The leader/follower protocol over an engine built elsewhere (tests: engines that fail on one
// rank). `local` is this rank's engine; ctx is where set_tunableop() switches.
std::unique_ptr<ProcessTpEngine> wrap_process_tp(std::unique_ptr<Engine> local, Context& ctx, ProcessGroup& group,
                                                 double fail_timeout_s = ProcessTpEngine::kFailTimeoutS);

}  // namespace tunableop::llm
