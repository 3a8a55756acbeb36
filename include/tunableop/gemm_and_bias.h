// GEMM with a bias + activation epilogue (PyTorch's GemmAndBiasTunableOp, what addmm / linear
// with bias call on CUDA): C = act(alpha * op(A) * op(B) + bias), column-major, where bias is a
// vector of m elements (one per row of C) broadcast over the n columns. beta is 0 (C is never
// read, it may hold NaN); there is no batch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop {

// PyTorch's GEMMAndBiasActivationEpilogue numbering (None 0, RELU 1, GELU 2). kGelu is the tanh
// approximation, as cuBLASLt's GELU epilogue computes it:
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class Activation { kNone = 0, kRelu = 1, kGelu = 2 };
const char* activation_name(Activation a);  // "none", "relu", "gelu"
StatusOr<Activation> parse_activation(const std::string& s);

struct GemmAndBiasParams {
  GemmParams gemm;  // batch must be 1 and beta 0; bias has gemm.dtype and gemm.m elements
  Activation act = Activation::kNone;

  GemmAndBiasParams with_defaults() const { return {gemm.with_defaults(), act}; }
  // gemm.validate(), plus batch == 1, beta == 0 and a known activation.
  Status validate() const;
};

// Op: "GemmAndBiasTunableOp_<dtype>[_tf32]_<TT>" (PyTorch's name). Params: the GEMM params
// signature ("tn_1024_512_2048", plus "_ld_LDA_LDB_LDC" when not dense) followed by
// "_act_<0|1|2>". PyTorch leaves the activation out of its key (so a ReLU and a GELU problem of
// one shape share one tuned solution there); we keep it, since the epilogue changes which
// kernels apply and how fast they are.
std::string gemm_and_bias_op_signature(const GemmAndBiasParams& p);
std::string gemm_and_bias_params_signature(const GemmAndBiasParams& p);
StatusOr<GemmAndBiasParams> parse_gemm_and_bias_signature(const std::string& op, const std::string& params);

struct GemmAndBiasOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;  // m elements of the GEMM's dtype
  void* c = nullptr;
  void* stream = nullptr;  // cudaStream_t on CUDA; unused on CPU
  // As GemmOperands: given while tuning, null in ordinary dispatch.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// One way to compute it. Backends register these into Registry::list<GemmAndBiasCandidate>().
struct GemmAndBiasCandidate {
  std::string name;  // "Default" for the plain library call
  DeviceKind device = DeviceKind::kCpu;
  int min_effort = 0;
  std::function<Status(const GemmAndBiasParams&)> supports;
  std::function<Status(const GemmAndBiasParams&, const GemmAndBiasOperands&)> run;
  std::function<size_t(const GemmAndBiasParams&)> workspace_bytes;  // optional
};

// Problem-dependent candidates (e.g. cuBLASLt algorithms with the epilogue), as
// GemmCandidateFamily: `expand` lists them for p, `resolve` rebuilds one from its stored name.
struct GemmAndBiasCandidateFamily {
  std::string prefix;
  DeviceKind device = DeviceKind::kCuda;
  int min_effort = 0;
  std::function<std::vector<GemmAndBiasCandidate>(const GemmAndBiasParams&, int search_effort)> expand;
  std::function<StatusOr<GemmAndBiasCandidate>(const GemmAndBiasParams&, const std::string& name)> resolve;
};

// Runs it through the context: tuned solution, tuning on a miss, or Default.
Status gemm_and_bias(Context& ctx, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops);

}  // namespace tunableop
