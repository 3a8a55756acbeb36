// Which kernel each projection of a decode step runs (issue 13): a fused kernel shape
// (fused_gemv.h) or the unfused path (tuned GEMM + element-wise kernels), chosen by timing them
// on the device the first time the projection runs, like TunableOp chooses a GEMM solution.
// The choices live with the engine (they are re-measured per process); once the op framework
// lands they become candidates of a fused-projection op with its results file.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "llm/cuda/fused_gemv.h"
#include "tunableop/status.h"

namespace tunableop::llm::cuda {

struct FusionCandidate {
  std::string name;  // "unfused", "fused_r2_sk1"
  bool fused = false;
  FusedGemvShape shape;
  double us = 0;  // median time measured (0: not timed)
};

struct FusionChoice {
  FusionCandidate best;
  std::vector<FusionCandidate> timed;  // fastest first
};

class DecodeFusion {
 public:
  // The choice for a site ("qkv bf16 2560x2048 n1"), or null before it is made.
  const FusionChoice* find(const std::string& site) const;
  const FusionChoice& set(const std::string& site, FusionChoice choice);
  // One line per site: the choice and the runner-up times.
  std::string report() const;

  // Times each of `runs` (each queues one candidate on `stream`) `reps` times, the candidates
  // interleaved, each run after a read of `flush_bytes` of `flush` that evicts the L2 (decode
  // streams the weights from memory, never from cache); median microseconds per candidate.
  static Status time_candidates(const std::vector<std::function<Status()>>& runs, int reps, const void* flush,
                                int64_t flush_bytes, float* sink, cudaStream_t stream, std::vector<double>* us);

 private:
  std::vector<std::pair<std::string, FusionChoice>> sites_;  // first-seen order
};

std::string fusion_candidate_name(const FusedGemvShape& s);

}  // namespace tunableop::llm::cuda
