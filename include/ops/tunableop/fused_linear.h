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

// An extension of the kStore output with a normalised input, given through the operands (not
// part of the problem: the kStore problem is tuned and checked as it is, and its candidates run
// this epilogue in the same shape): y is the fused qkv rows [tokens, (n_heads + 2 n_kv_heads) x
// head_dim] (out must equal that width); rotate-half RoPE is applied to its q and k heads at
// positions[t] (pairs i, i + head_dim/2 of a head: y = E(E(a) cos - E(b) sin), E(E(b) cos +
// E(a) sin), fp32 cos/sin tables [position][head_dim/2]), v is stored as is, and each token's k
// (rotated) and v heads are also written into the layer's KV cache at (seqs[t], positions[t]):
// static [seq][kv_head][max_seq][head_dim], or paged (block_table non-null) pools
// [page][kv_head][page_size][head_dim] through block_table [seq][pages_per_seq], nothing stored
// for a position at or past its sequence's length (seq_lens). The bits of kStore followed by
// the LLM engine's rope_store kernel. All pointers are device memory.
struct FusedLinearRope {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const int32_t* seqs = nullptr;       // [tokens]
  const int32_t* positions = nullptr;  // [tokens]
  const float* cos = nullptr;          // [max position + 1][head_dim / 2]
  const float* sin = nullptr;
  void* k_cache = nullptr;  // this layer's, E
  void* v_cache = nullptr;
  int64_t max_seq = 0;                   // static cache
  const int32_t* block_table = nullptr;  // paged cache: [seq][pages_per_seq]
  int64_t page_size = 0, pages_per_seq = 0;
  const int32_t* seq_lens = nullptr;  // paged cache: [seq]
  // CUDA: the fused GEMV's shape for this call (rows per unit, a multiple of 2, and k split; 0:
  // the plan's tuned shape, rows 1 run as 2). A step-level choice (the LLM engine times whole
  // decode steps with each); a shape the kernel does not offer is unsupported.
  int rows = 0, k_split = 0;
};

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
  // kStore with a normalised input only: RoPE and the KV-cache write in the epilogue (see
  // FusedLinearRope); null: plain kStore. Tuning runs without it.
  const FusedLinearRope* rope = nullptr;
  // CUDA: the fused GEMV's shape for this call (rows per unit, k split), not the plan's tuned
  // one (0: the plan's): a step-level choice (the LLM engine times whole decode steps with each).
  // A shape the kernel does not offer for the output is unsupported. Tuning runs without it.
  int rows = 0, k_split = 0;
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
