// FusedLinear: a transformer layer's projection for a few tokens together with the element-wise
// work around it (issue 13's decode fusions), y = in W^T where
//   in = the input (E), or rmsnorm(x) = E(x / sqrt(mean(x^2) + eps) * w) of an fp32 x, with w or
//        (1 + w) (Gemma) as the norm weight;
//   the output is y stored (E), added to an fp32 residual (residual += float(E(y))), gated
//   (E(act(E(y[:, i])) * E(y[:, out/2 + i])), the gate_up layout), y stored and each token's
//   argmax written (the first index of the largest logit, as torch.argmax), or y stored in fp32
//   unrounded (tensor parallelism's row-parallel partial sums, summed across GPUs before any
//   rounding; plain input only).
// Row-major like a model's tensors: W [out, in], in/x [tokens, in], y/residual [tokens, out],
// gated [tokens, out/2]. E = dtype (fp32 or bf16); the norm weight is E.
//
// Candidates (CUDA backend): the fused kernel in several shapes; Default is its first shape.
// There is no unfused candidate: the unfused path (rmsnorm kernel, a tuned GEMM, an element-wise
// kernel) belongs to whoever calls, who can time this op's plan against it (the LLM engine
// does). Offered for 1 to 8 tokens (the decode regime; past that, GEMMs on tensor cores win).
#pragma once

#include <cstdint>
#include <string>

#include "tunableop/op.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

enum class FusedInput { kPlain = 0, kRmsNorm = 1, kRmsNormPlusOne = 2 };
enum class FusedOutput {
  kStore = 0,
  kAddResidual = 1,
  kGatedSilu = 2,
  kGatedGeluTanh = 3,
  kGatedGeluErf = 4,
  kArgmax = 5,
  kStoreF32 = 6
};

inline constexpr int64_t kFusedLinearMaxTokens = 8;

struct FusedLinearOp;

struct FusedLinearParams {
  using Op = FusedLinearOp;
  DType dtype = DType::kBF16;
  int64_t out = 0, in = 0, tokens = 0;
  FusedInput input = FusedInput::kPlain;
  double eps = 1e-6;  // rmsnorm inputs only
  FusedOutput output = FusedOutput::kStore;

  bool norm() const { return input != FusedInput::kPlain; }
  bool gated() const {
    return output == FusedOutput::kGatedSilu || output == FusedOutput::kGatedGeluTanh ||
           output == FusedOutput::kGatedGeluErf;
  }
  // dtype fp32 or bf16; 1 <= tokens <= 8; in a positive multiple of 16 bytes of dtype; out >= 1
  // and < 2^31 (gated: even); a normalised input of at most 160 KiB (tokens x in elements: it
  // lives in shared memory); eps > 0.
  Status validate() const;
};

// Op: "FusedLinearTunableOp_<dtype>" (dtype as PyTorch names it). Params:
// "out_<out>_tokens_<tokens>_in_<in>_input_<0|1|2>_eps_<eps>_output_<0..6>" (the enums' values).
std::string fused_linear_op_signature(const FusedLinearParams& p);
std::string fused_linear_params_signature(const FusedLinearParams& p);
StatusOr<FusedLinearParams> parse_fused_linear_signature(const std::string& op, const std::string& params);

struct FusedLinearOperands {
  const void* w = nullptr;      // [out, in]
  const void* input = nullptr;  // kPlain: [tokens, in]
  const float* x = nullptr;     // rmsnorm: [tokens, in] fp32
  const void* norm = nullptr;   // rmsnorm: [in]
  void* y = nullptr;            // kStore, kArgmax: [tokens, out]; kStoreF32: the same in fp32
  float* residual = nullptr;    // kAddResidual: [tokens, out] fp32, accumulated into
  void* gated = nullptr;        // gated: [tokens, out / 2]
  int32_t* ids = nullptr;       // kArgmax: [tokens]
  void* stream = nullptr;       // cudaStream_t
  // Launch options (no effect on the result): programmatic dependent launch (0 off, 1 early
  // trigger, 2 late; sm_90) and up to two buffers to prefetch into the L2 once the work is done
  // (the next projections' weights). Tuning runs without them.
  int pdl = 0;
  const void* prefetch[2] = {nullptr, nullptr};
  int64_t prefetch_bytes[2] = {0, 0};
  // As GemmOperands: given while tuning, null in ordinary dispatch.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

struct FusedLinearOp {
  using Params = FusedLinearParams;
  using Operands = FusedLinearOperands;
};
using FusedLinearCandidate = Candidate<FusedLinearOp>;
using FusedLinearPlan = Plan<FusedLinearOp>;
extern template class Plan<FusedLinearOp>;

// Runs it through the context: tuned solution, tuning on a miss, or Default.
Status fused_linear(Context& ctx, const FusedLinearParams& p, const FusedLinearOperands& ops);
StatusOr<FusedLinearPlan> make_plan(Context& ctx, const FusedLinearParams& p);

}  // namespace tunableop
