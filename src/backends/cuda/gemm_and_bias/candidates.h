// GemmAndBias on CUDA:
//   "Default"            cuBLASLt matmul with CUBLASLT_EPILOGUE_BIAS / RELU_BIAS / GELU_BIAS and
//                        the heuristic's first algorithm, as PyTorch's gemm_and_bias (fp32, bf16,
//                        fp16). fp64, k == 0, a bias pointer not 16-byte aligned or an empty
//                        heuristic answer go through the split path below instead.
//   "GemmAndBias_Lt_..." the heuristic's algorithms with that epilogue (up to
//                        kLtBiasHeuristicCount); the name carries the full configuration in the
//                        Gemm_Lt_ scheme (common/lt_plan.h) and is rebuilt from it.
//   "GemmAndBias_Split"  plain cuBLAS GEMM (cuBLAS Default) then our bias/activation kernel.
#pragma once

#include "tunableop/gemm_and_bias.h"
#include "tunableop/registry.h"

namespace tunableop::cuda {

inline constexpr const char* kLtBiasPrefix = "GemmAndBias_Lt_";
inline constexpr int kLtBiasHeuristicCount = 8;  // PyTorch TunableOp's count for cuBLASLt

GemmAndBiasCandidate make_gemm_and_bias_default();
GemmAndBiasCandidate make_gemm_and_bias_split();
GemmAndBiasCandidateFamily make_gemm_and_bias_lt_family();

// Appends Default, Split (to r.list<GemmAndBiasCandidate>()) and the Lt family.
void register_cuda_gemm_and_bias(Registry& r);

}  // namespace tunableop::cuda
