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

struct GemmAndBiasOp;

struct GemmAndBiasParams {
  using Op = GemmAndBiasOp;
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

struct GemmAndBiasOp {
  using Params = GemmAndBiasParams;
  using Operands = GemmAndBiasOperands;
};
// Backends register these into Registry::list<GemmAndBiasCandidate>(); problem-dependent ones
// (cuBLASLt algorithms with the epilogue) as a GemmAndBiasCandidateFamily.
using GemmAndBiasCandidate = Candidate<GemmAndBiasOp>;
using GemmAndBiasCandidateFamily = CandidateFamily<GemmAndBiasOp>;
using GemmAndBiasPlan = Plan<GemmAndBiasOp>;
extern template class Plan<GemmAndBiasOp>;

// Runs it through the context: tuned solution, tuning on a miss, or Default.
Status gemm_and_bias(Context& ctx, const GemmAndBiasParams& p, const GemmAndBiasOperands& ops);
StatusOr<GemmAndBiasPlan> make_plan(Context& ctx, const GemmAndBiasParams& p);

}  // namespace tunableop
