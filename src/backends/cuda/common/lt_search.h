// The search over cuBLASLt's algorithms for one problem, whatever its descriptors (GEMM's
// LtPlan, ScaledGemm's FP8 descriptors): the heuristic's list, the best configuration of each
// algorithm id, an exhaustive enumeration of configurations, and rebuilding one configuration
// (LtConfig, the name scheme of lt_plan.h) as a checked algorithm.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/common/lt_plan.h"
#include "tunableop/status.h"

namespace tunableop::cuda {

// One problem as cuBLASLt sees it: its descriptors (owned elsewhere) and the types that
// cublasLtMatmulAlgoGetIds / AlgoInit want.
struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F, a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F, d_type = CUDA_R_32F;
  int64_t k = 0;  // split-K variants thinner than one k-tile are not offered
};
LtProblem lt_problem(const LtPlan& plan);

// AlgoCheck against the problem; fails (unsupported) when it does not run here or needs more
// than kLtMaxWorkspaceBytes. `workspace` receives the bytes it needs.
Status lt_check_algo(cublasLtHandle_t h, const LtProblem& p, const cublasLtMatmulAlgo_t& algo, size_t* workspace);
// An algorithm from a configuration, checked.
StatusOr<cublasLtMatmulAlgo_t> lt_make_algo(cublasLtHandle_t h, const LtProblem& p, const LtConfig& c,
                                            size_t* workspace);

// Appends configurations to `out`: the heuristic's list (BEST_FIT, its own order, up to
// `count`); the best configuration of every algorithm id; every valid (id, tile, stages) base
// varied one dimension at a time (custom option, swizzle, split-K x reduction, cluster), up to
// `limit` in all.
void lt_heuristic_configs(cublasLtHandle_t h, const LtProblem& p, int count, std::vector<LtConfig>& out);
void lt_per_id_configs(cublasLtHandle_t h, const LtProblem& p, std::vector<LtConfig>& out);
void lt_exhaustive_configs(cublasLtHandle_t h, const LtProblem& p, size_t limit, std::vector<LtConfig>& out);

// A preference descriptor with the workspace limit (kLtMaxWorkspaceBytes) and, when given, the
// pointers' alignments (bytes; 0 leaves cuBLASLt's default of 256).
struct LtPreference {
  cublasLtMatmulPreference_t pref = nullptr;
  LtPreference() = default;
  LtPreference(const LtPreference&) = delete;
  LtPreference& operator=(const LtPreference&) = delete;
  ~LtPreference();
  Status init(bool by_algo_id = false, uint32_t align_a = 0, uint32_t align_b = 0, uint32_t align_c = 0);
};

// Largest power of two (up to 256) dividing the address.
uint32_t lt_alignment_of(const void* p);

}  // namespace tunableop::cuda
