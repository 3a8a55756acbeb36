// cuBLASLt candidates as one family (names "Gemm_Lt_..."): the heuristic list, the best config
// of each algorithm id, and (search effort 2) an exhaustive enumeration of configurations.
#pragma once

#include "tunableop/gemm.h"

namespace tunableop::cuda {

GemmCandidateFamily make_lt_family();

// Limits of the enumeration (documented in docs/backends-cuda.md).
inline constexpr int kLtHeuristicRequest = 64;        // "every algorithm returned, asked for 64"
inline constexpr int kLtHeuristicRequestEffort0 = 8;  // PyTorch TunableOp's count
inline constexpr int kLtExhaustiveMaxConfigs = 512;   // valid configs kept at effort 2

}  // namespace tunableop::cuda
