// Tensor parallelism's row-parallel projections (o, down) on one CUDA rank: y = input W^T of
// the rank's share of the input columns, written as fp32 partial sums (never rounded to the
// model dtype), which the all-reduce then sums across the ranks, rounds once to the dtype (where
// one device rounds its GEMM output) and adds to the fp32 residual stream
// (TensorParallelRank::all_reduce_residual). TP=N then differs from one device only by the fp32
// summation order, not by an extra bf16 rounding of every partial sum.
//
// Decode with the fused projections on: the FusedLinear op's fp32 store (FusedOutput::kStoreF32,
// its shape tuned like every site's). Otherwise, and for shapes that kernel does not take: the
// GEMM op with an fp32 C (GemmParams::out_dtype: bf16 x bf16 -> fp32, fp32 accumulation, no
// TF32), a tuned problem like every other GEMM of the engine.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "cuda_common/cuda_memory.h"
#include "llm/device_kernels.h"
#include "tunableop/context.h"
#include "tunableop/fused_linear.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop::llm::cuda {

// The weights read after row-parallel projection `w` (o: its layer's gate_up; down: the next
// layer's qkv, or the lm_head of `lm_head_rows` rows after the last layer) and at most `cap`
// bytes of them; {nullptr, 0} for another weight.
std::pair<const void*, int64_t> next_weights(const DeviceWeights& weights, const ModelConfig& c, const void* w,
                                             int64_t lm_head_rows, size_t esize, int64_t cap);

class RowParallelGemm {
 public:
  RowParallelGemm() = default;
  RowParallelGemm(const RowParallelGemm&) = delete;
  RowParallelGemm& operator=(const RowParallelGemm&) = delete;

  // Every GEMM then runs on `stream` (the engine's, which CUDA graphs capture).
  Status init(cudaStream_t stream);
  // y[rows, out] (fp32) = x[rows, in] W[out, in]^T, x and W of `dtype` (bf16 or fp32), through
  // ctx's GEMM op.
  Status run(Context& ctx, DType dtype, int64_t rows, int64_t in, int64_t out, const void* x, const void* w, float* y);

  // Projection p's fp32 partial sums (p.input W^T) in a buffer of this object's: the FusedLinear
  // problem `fused` with operands `fo` (its y is set here) when given and the kernel takes it,
  // else run(). Decode's buffer never moves (a captured graph holds it; sized for `max_batch`
  // rows), prefill's grows. `kernel`: what ran, for the profile.
  StatusOr<float*> partial_sums(Context& ctx, const Projection& p, DType dtype, int64_t max_batch,
                                const FusedLinearParams* fused, FusedLinearOperands fo, std::string* kernel);

 private:
  cudaStream_t stream_ = nullptr;
  ::tunableop::cuda::DeviceBuffer decode_partial_, prefill_partial_;
  std::map<std::string, FusedLinearPlan> plans_;  // per decode site
  std::set<std::string> unfused_;                 // decode sites the fused kernel does not take
};

}  // namespace tunableop::llm::cuda
