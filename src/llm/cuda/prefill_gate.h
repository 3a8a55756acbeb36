// The CUDA device's prefill gate (a part of the CUDA device's split, issue 26): prefill's
// gate_up (issue 12) two ways, chosen per site by measurement with TunableOp on:
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
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "llm/config.h"
#include "llm/cuda/cudnn_gate.h"
#include "llm/cuda/decode_fusion.h"
#include "llm/cuda/kernels.h"
#include "llm/device_kernels.h"
#include "llm/linear_op.h"
#include "tunableop/context.h"

namespace tunableop::llm::cuda {

class PrefillGate {
 public:
  // What the gate needs from the device it serves.
  struct Hooks {
    std::function<Status(const Projection&, LinearOp&)> unfused;                // gemm+gated: the device's composition
    std::function<void(const char*, const char*, int64_t, bool, double)> mark;  // DeviceKernels::mark
    std::function<StatusOr<std::pair<const void*, int64_t>>()> flush;           // a buffer whose read evicts the L2
    float* sink = nullptr;                                                      // where timing reads write
    bool* timing = nullptr;  // true while the gate times candidates (the device drops their marks)
  };
  explicit PrefillGate(Context& ctx);
  void init(cudaStream_t stream, Activation activation);
  // p (a bf16 prefill gate_up, normed input, gated output) through the site's choice.
  Status project(const Projection& p, LinearOp& linear, const std::string& site, const Hooks& h);
  // One line per site: the choice, how it was made, the times.
  std::string report() const;

 private:
  static constexpr const char* kGateOp = "PrefillGateTunableOp_BFloat16";
  Act act() const;
  std::string params(const Projection& p) const;
  Status up_gemm(const Projection& p, LinearOp& linear, const Hooks& h);
  Status run_cudnn(const Projection& p, LinearOp& linear, const std::string& tag, const Hooks& h);
  StatusOr<std::vector<float>> gated_sample(const Projection& p);
  // The cuDNN configuration tag for the site ("": gemm+gated).
  StatusOr<std::string> choice(const Projection& p, LinearOp& linear, const std::string& site, const Hooks& h);

  Context& ctx_;
  cudaStream_t stream_ = nullptr;
  Activation activation_ = Activation::kSilu;
  struct GateChoice {
    std::string tag;                                    // cuDNN's configuration; empty: gemm+gated
    std::string how;                                    // "timed", "results file", "forced", or why cuDNN was not used
    double us_default = 0, us_up = 0, us_best = 0;      // gemm+gated, the up GEMM alone, the best cuDNN path
    std::vector<std::pair<std::string, double>> timed;  // up GEMM + each configuration's gate
    int rejected = 0;
  };
  std::map<std::string, GateChoice> choices_;  // per prefill gate_up site
  CudnnGate cudnn_gate_;
};

}  // namespace tunableop::llm::cuda
