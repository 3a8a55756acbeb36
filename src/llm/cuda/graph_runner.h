// The CUDA device's graph runner (issue 26's split of the CUDA device): decode steps and
// prefills captured as CUDA graphs and replayed, above the forward pass, which it sees only as
// a closure that queues one step on the stream.
//
// Decode: one graph per StepKey (batch, TunableOp on/off, which block table the step reads).
// The first step of a key runs eagerly (tuning, workspace growth and attribute setup happen
// there, outside capture); then the step is captured. With the fused projections tuned
// (TunableOp on) the step is also built several ways (StepVariant: fusion, PDL, L2 prefetch,
// RoPE placement); which way is chosen by the core tuner as a problem of its own
// (DecodeStepTunableOp_<dtype>, its params the model's shape and the key), kept in the results
// file like any other, so a later process captures only the stored variant.
//
// A graph holds the solutions its GEMMs and attention had when it was captured. When the
// results change (a tuning elsewhere in the process, the in-context check, a server's idle-time
// tuning), a graph is captured again only if one of its own problems now has another solution.
//
// Prefill: PrefillGraphs' policy (llm/prefill_graphs.h), static KV cache on one GPU.
#pragma once

#include <cuda_runtime.h>

#include <compare>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_common/cuda_memory.h"
#include "llm/cuda/decode_fusion.h"
#include "llm/linear_op.h"
#include "llm/prefill_graphs.h"
#include "tunableop/context.h"

namespace tunableop::llm::cuda {

// One captured decode step: its batch, TunableOp on or off, and whether it reads a slot pass's
// block table (Engine::decode_slots) or the cache's.
struct StepKey {
  int64_t batch = 0;
  bool enabled = false, slot_table = false;
  auto operator<=>(const StepKey&) const = default;
};

class GraphRunner {
 public:
  // `variant`: the device's (project() and the fused kernels read it while a step is queued);
  // the runner sets it before each capture. `model`: the model's shape as a results-file params
  // prefix ("llama_l32_h4096_i11008_q32_kv32_d128_v32000"), `dtype` its element type.
  GraphRunner(Context& ctx, cudaStream_t stream, StepVariant& variant, bool pdl_capable, std::string model,
              DType dtype);

  struct DecodePolicy {
    bool graphs = true;     // capture at all (EngineOptions::cuda_graph)
    bool variants = false;  // choose among the step variants (fused projections tuned, one GPU)
    int forced = -1;        // a step variant index given by the user (EngineOptions::step_variant)
  };
  Status decode_step(const StepKey& key, LinearOp& linear, const std::function<Status()>& step,
                     const DecodePolicy& policy);
  // The step and `advance` as one graph per (key, slot), built like the key's own graph.
  Status decode_step_ahead(const StepKey& key, int slot, LinearOp& linear, const std::function<Status()>& step,
                           const std::function<Status()>& advance, const DecodePolicy& policy);
  // `graphs`: prefill graphs apply (static cache, one GPU, not profiling).
  Status prefill(const PrefillShape& shape, LinearOp& linear, const std::function<Status()>& pass, bool graphs);

  // Why decode or prefill graphs are off (a capture failed), else empty.
  const std::string& decode_error() const { return decode_error_; }
  const std::string& prefill_error() const { return prefill_error_; }
  // One line per key whose variant was chosen: the choice and how it was made.
  std::string report() const;

 private:
  struct Graph {
    ::tunableop::cuda::GraphExec exec;
    std::vector<LinearOp::Problem> calls, attention_calls;
    std::vector<std::string> solutions;  // of calls then attention_calls, when captured
    bool tunableop = false;              // captured with TunableOp on (off: every problem runs Default)
    uint64_t results = 0;                // the results' version it was last checked against
    StepVariant variant;                 // how its step was built
  };
  Status replay(const Graph& g, LinearOp& linear);
  StatusOr<Graph> capture(LinearOp& linear, const std::function<Status()>& step);
  // Whether g must be captured again: the results moved and one of its problems' solutions too.
  bool stale(Graph& g);
  std::string solution_of(const LinearOp::Problem& p) const;
  // The key's variant through the core tuner (a hit in the results: that one; a miss with
  // tuning on: every variant captured and timed; else the default).
  StatusOr<StepVariant> choose_variant(const StepKey& key, LinearOp& linear, const std::function<Status()>& step);
  std::string step_params(const StepKey& key) const;

  Context& ctx_;
  cudaStream_t stream_;
  StepVariant& variant_;
  std::vector<StepVariant> variants_;  // step_variants(pdl_capable)
  StepVariant default_variant_;
  std::string model_, op_;
  std::map<StepKey, Graph> graphs_;
  std::map<StepKey, StepVariant> chosen_;  // sticky: a recapture reuses the key's variant
  std::map<std::tuple<int64_t, bool, bool, int>, Graph> ahead_;
  PrefillGraphs<Graph> prefill_graphs_;
  std::string decode_error_, prefill_error_;
  std::vector<std::string> report_;
};

}  // namespace tunableop::llm::cuda
