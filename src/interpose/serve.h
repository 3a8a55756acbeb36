// The one place where an intercepted call, once mapped to our params, is dispatched: the
// problem's plan decides (the op framework's slot, found by its ops::ProblemKey; a hit is a
// hashed lookup and a generation check), then serve() runs our candidate or hands the call back
// to the library, with the interposer's capture and workspace rules.
#pragma once

#include <cstddef>

#include "interpose/abi.h"
#include "interpose/engine.h"
#include "tunableop/gemm.h"
#include "tunableop/gemm_and_bias.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::interpose {

// What the program's call brought besides the problem: where it runs and the workspace the
// program gave it (the cuBLAS handle's, or cuBLASLt's argument).
struct CallSite {
  bool gpu = false;
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // The program's own call made again on other buffers (the tuning copies; a, b, c in our
  // params' roles): while this call is tuned it is "Default", so that a candidate must beat
  // exactly what the program would have run (its handle or descriptors, workspace, math mode,
  // algorithm) rather than our approximation of it. Null: our Default stands in.
  Status (*replay)(const void* call, const void* a, const void* b, void* c) = nullptr;
  const void* replay_call = nullptr;
};

// Rules (docs/interpose.md):
// - first sight outside a capture: tune (tuning on), or record (--record), as any plan decides
//   (Context::decide); on a GPU the tuning's Default is the program's own call (CallSite::replay,
//   the plan's Default override) and its clock counts device time only (held_timer.h, the
//   plan's timer wrapper);
// - while the stream captures a CUDA graph: never tune, allocate or synchronize; serve a known
//   result whose workspace is at hand, else pass through (a miss is recorded in the untuned file
//   and, for GEMMs with tuning on, tuned on random data at the next call outside a capture);
// - a tuned "library default" (GPU Default, the CPU's Gemm_ProgramBlas) and every miss with
//   tuning off go back to the program's library untouched.
Outcome serve_gemm(DeviceEngine& dev, const GemmParams& p, const GemmOperands& ops, const CallSite& site);
Outcome serve_gemm_and_bias(DeviceEngine& dev, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops,
                            const CallSite& site);
// An FP8 cublasLtMatmul (torch._scaled_mm): the replayed call keeps the program's scale and bias
// pointers (their values equal the tuning copies').
Outcome serve_scaled_gemm(DeviceEngine& dev, const ScaledGemmParams& p, const ScaledGemmOperands& ops,
                          const CallSite& site);

}  // namespace tunableop::interpose
