// ScaledGemm on CUDA:
//   "Default"             what torch._scaled_mm runs: cuBLASLt's first heuristic answer for the
//                         problem (precise accumulation, these pointers' alignments); where
//                         cuBLASLt's FP8 kernels refuse the problem, our simt kernel.
//   "Fp8_Lt_..."          cuBLASLt FP8 configurations (heuristic list, best of each algorithm
//   "Fp8_LtFast_..."      id, exhaustive at effort 2), with precise or fast accumulation: the
//                         numerics check decides whether fast accumulation is accurate enough.
//                         The rest of the name is the Gemm_Lt_ scheme (common/lt_plan.h).
//   "Fp8_Gemv_r<R>_sk<S>" our decode kernel (n <= 16, TN, e4m3 x e4m3).
//   "Fp8_Simt"            our generic kernel (any layout; slow).
//   "Fp8_SplitM[_PadC]_g64"  an m that is not a multiple of 64 (vocabulary sizes): the aligned
//                         rows through cuBLASLt (into a padded C, then copied out, for PadC),
//                         the rest through Fp8_Simt.
//   "Fp8_PadC_g64"        an ldc that is not a multiple of 64: cuBLASLt into a padded C,
//                         copied out.
#pragma once

#include "tunableop/registry.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::cuda {

inline constexpr const char* kFp8LtPrefix = "Fp8_Lt_";
inline constexpr const char* kFp8LtFastPrefix = "Fp8_LtFast_";
inline constexpr int kFp8LtHeuristicRequest = 64;        // as GEMM's family
inline constexpr int kFp8LtHeuristicRequestEffort0 = 8;  // PyTorch TunableOp's count
inline constexpr int kFp8LtExhaustiveMaxConfigs = 256;   // per accumulation mode, at effort 2

ScaledGemmCandidate make_scaled_gemm_default();
ScaledGemmCandidateFamily make_fp8_lt_family(bool fast_accum);

// Appends Default, our kernels, the split variants and both cuBLASLt families.
void register_cuda_scaled_gemm(Registry& r);

}  // namespace tunableop::cuda
