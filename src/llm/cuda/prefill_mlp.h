// Prefill's MLP up-projection (the gate_up GEMM and the gated activation after it) as a choice
// made by measurement (issue 12). The activation reads the GEMM's whole output (Gemma-2B at
// 2048 tokens: 134 MB a layer) and is bound by memory; what it finds still in the L2 it does not
// read from HBM. Variants: the rows in 1, 2 or 4 chunks (GEMM of a chunk, then its activation:
// less output between writing and reading it, at the price of smaller GEMMs that each read the
// whole weight), and the activation visiting rows in order or last first (the GEMM's last
// output is the likeliest to be in the L2). A chunk's GEMM is its own problem, tuned as such:
// its rows may differ from the whole GEMM's in the last bits, as between any two tuned
// solutions; the activation gives the same bits in either order. Timed whole, the L2 evicted
// before each run, on the first tuned prefill of each site; TunableOp off runs the plain form.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "llm/linear_op.h"
#include "tunableop/log.h"
#include "tunableop/status.h"

namespace tunableop::llm::cuda {

struct MlpVariant {
  int chunks = 1;
  bool reverse = false;
  std::string name() const;  // "rows/2 last-first"
};

using MlpGemm = std::function<Status(int64_t first_row, int64_t rows)>;
using MlpAct = std::function<Status(int64_t first_row, int64_t rows, bool reverse)>;

// The variants for `rows` tokens: chunks of at least 256 rows that split the rows evenly into
// multiples of 64 (1 chunk always), each in order and last first.
std::vector<MlpVariant> mlp_variants(int64_t rows);

// Queues variant v over `rows`: gemm(first row, rows) of each chunk, then act(first row, rows,
// reverse) of the same chunk.
Status run_mlp_variant(const MlpVariant& v, int64_t rows, const MlpGemm& gemm, const MlpAct& act);

struct MlpChoice {
  MlpVariant best;
  std::vector<std::pair<MlpVariant, double>> timed;  // median us, fastest first
};

// How variants are timed: DecodeFusion::time_candidates (interleaved, median of 5, each run after
// a read of `flush_bytes` of `flush` that evicts the L2); *quiet is set while timing (the
// device's profile marks stay off).
struct MlpTiming {
  const void* flush = nullptr;
  int64_t flush_bytes = 0;
  float* sink = nullptr;
  cudaStream_t stream = nullptr;
  bool* quiet = nullptr;
};

// The choices per site ("gate_up bf16 32768x2048 n2048").
class PrefillMlpChoices {
 public:
  // The variant for `site`. Its first call (not under graph capture) runs every variant once
  // (TunableOp tunes the chunks' GEMMs here) and times them; the GEMM calls of this are taken
  // back from `linear`'s counts. A failed timing keeps the plain variant, with a warning.
  StatusOr<MlpVariant> choose(const std::string& site, int64_t rows, const MlpGemm& gemm, const MlpAct& act,
                              LinearOp& linear, const MlpTiming& timing, Logger& log);
  const MlpChoice* find(const std::string& site) const;
  const MlpChoice& set(const std::string& site, MlpChoice choice);
  std::string report() const;  // one line per site: the choice and every variant's time

 private:
  std::map<std::string, MlpChoice> sites_;
};

}  // namespace tunableop::llm::cuda
