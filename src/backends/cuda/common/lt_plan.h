// cuBLASLt building blocks: the descriptors of one problem (LtPlan), an algorithm's full
// configuration (LtConfig) and the stable solution name that encodes it.
//
// Name scheme (every field decimal, in this order; all are cuBLASLt's own enum values):
//   Gemm_Lt_a<algo id>_t<tile id>_s<stages id>_k<split-K count>_r<reduction scheme>
//          _w<CTA swizzle>_c<custom option>_i<inner shape id>_cl<cluster shape id>
// e.g. Gemm_Lt_a66_t23_s33_k1_r0_w0_c0_i0_cl2. The name alone rebuilds the algorithm with
// cublasLtMatmulAlgoInit + ConfigSetAttribute; cublasLtMatmulAlgoCheck then says whether it
// still runs on this device and library for this problem.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::cuda {

// Upper bound of the workspace a cuBLASLt candidate may ask for (the op allocates it).
inline constexpr size_t kLtMaxWorkspaceBytes = size_t(32) << 20;

struct LtConfig {
  int32_t id = 0;
  uint32_t tile = 0;
  uint32_t stages = 0;
  int32_t split_k = 1;
  uint32_t reduction = 0;
  uint32_t swizzle = 0;
  uint32_t custom = 0;
  uint16_t inner = 0;
  uint16_t cluster = 0;
  bool operator==(const LtConfig&) const = default;
};

std::string lt_name(const LtConfig& c);
// The config as a candidate description (library cuBLASLt, every field a detail).
CandidateInfo lt_info(const LtConfig& c, std::string algorithm);
StatusOr<LtConfig> parse_lt_name(const std::string& name);
inline constexpr const char* kLtPrefix = "Gemm_Lt_";

// Matmul and layout descriptors for one problem; read-only after creation, so one plan may be
// used by several threads at once.
class LtPlan {
 public:
  static StatusOr<std::shared_ptr<LtPlan>> create(const GemmParams& p);
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  const GemmParams& params() const { return p_; }
  // True when q has the same shape, layout and dtype as this plan (alpha/beta may differ).
  bool matches(const GemmParams& q) const;

  // An algorithm for this problem from a config; fails (unsupported) when AlgoCheck rejects it
  // or it needs more than kLtMaxWorkspaceBytes. `workspace` receives the bytes it needs.
  StatusOr<cublasLtMatmulAlgo_t> make_algo(cublasLtHandle_t h, const LtConfig& c, size_t* workspace) const;
  // Checks an algorithm (e.g. from the heuristic) against this plan; fills its workspace size.
  Status check_algo(cublasLtHandle_t h, const cublasLtMatmulAlgo_t& algo, size_t* workspace) const;

  // alpha and beta come from `p` (they are not part of the plan).
  Status run(cublasLtHandle_t h, const cublasLtMatmulAlgo_t& algo, const GemmParams& p, const GemmOperands& o) const;

  cublasLtMatmulDesc_t op() const { return op_; }
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }
  cublasLtMatrixLayout_t c() const { return c_; }

 private:
  LtPlan() = default;
  GemmParams p_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
};

LtConfig read_config(const cublasLtMatmulAlgo_t& algo);

// A matrix layout of `t` (batch > 1: strided batches `stride` elements apart); the caller owns it.
StatusOr<cublasLtMatrixLayout_t> make_lt_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                                                int64_t batch = 1, int64_t stride = 0);

// Minimum pointer alignments (bytes) the algorithm needs for A, B, C/D; pointers that are less
// aligned make the candidate answer "unsupported" at run time.
struct LtAlignment {
  uint32_t a = 256, b = 256, c = 256;
};
LtAlignment algo_alignment(const cublasLtMatmulAlgo_t& algo);

}  // namespace tunableop::cuda
