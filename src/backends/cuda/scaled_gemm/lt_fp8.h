// ScaledGemm on cuBLASLt's FP8 kernels: the descriptors of one problem, a run with a given
// algorithm, and the heuristic's first answer (what torch._scaled_mm runs).
//
// Descriptors as PyTorch's scaled_gemm builds them (CUDA >= 12.9): compute 32F, scale 32F,
// A/B_SCALE_MODE scalar or outer vector (rowwise), FAST_ACCUM, BIAS epilogue with the bias type;
// C typed as the bias (the output without one), its pointer A's (beta is 0: never read). The
// scale and bias pointers go on a descriptor kept per thread and pointer set (fp8_desc below):
// setting them on every call costs microseconds of host time, and a program's scales and biases
// are few and stable buffers.
#pragma once

#include <cublasLt.h>

#include <memory>

#include "backends/cuda/common/lt_plan.h"
#include "backends/cuda/common/lt_search.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::cuda {

// Where cuBLASLt's FP8 kernels may apply: TN (Hopper and Ada take no other layout), not
// e5m2 x e5m2, lda and ldb multiples of 16 elements; the rest is cuBLASLt's to refuse.
Status lt_fp8_applies(const ScaledGemmParams& p);

// The layouts and a search descriptor (scale and bias pointers set to a dummy device buffer:
// the heuristic and AlgoCheck never read them) of one problem and accumulation mode.
class Fp8LtPlan {
 public:
  static StatusOr<std::shared_ptr<Fp8LtPlan>> create(const ScaledGemmParams& p, bool fast_accum);
  ~Fp8LtPlan();
  Fp8LtPlan(const Fp8LtPlan&) = delete;
  Fp8LtPlan& operator=(const Fp8LtPlan&) = delete;

  const ScaledGemmParams& params() const { return p_; }
  bool fast_accum() const { return fast_; }
  bool matches(const ScaledGemmParams& q) const;
  const LtProblem& problem() const { return problem_; }
  // One run with `algo` (checked against this plan), the operands' pointers on a kept descriptor.
  Status run(const cublasLtMatmulAlgo_t& algo, size_t workspace, const ScaledGemmOperands& o) const;

 private:
  Fp8LtPlan() = default;
  ScaledGemmParams p_;
  bool fast_ = false;
  LtProblem problem_;
};

// The heuristic's first algorithm for these operands' alignments (cached per thread, problem,
// mode and alignments: the heuristic answers the same every time, and asking it on every call
// would time host work instead of the kernel). Not ok when it offers none.
struct Fp8HeuristicChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
};
StatusOr<Fp8HeuristicChoice> fp8_heuristic_first(const Fp8LtPlan& plan, const ScaledGemmOperands& o);

// Keyed per thread by the problem (params and mode), for Default's plans.
StatusOr<std::shared_ptr<Fp8LtPlan>> kept_fp8_plan(const ScaledGemmParams& p, bool fast_accum);

}  // namespace tunableop::cuda
