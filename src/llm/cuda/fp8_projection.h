// The CUDA device's fp8 projections (EngineOptions::fp8; docs/llm.md, "FP8"). A projection whose
// weight is e4m3 (CudaWeights::fp8_scales) runs as
//   input  -> e4m3 + one scale per token: fused into the kernel that makes the input (the
//             rmsnorm of a normed projection: rmsnorm_fp8; down's gated activation, which
//             gate_up's epilogue computes straight into e4m3: gated_activation_fp8), or a
//             quantizing pass over a plain input (o's, attention's output: quantize_rows_fp8);
//   GEMM   -> a ScaledGemm problem through LinearOp::scaled (tuned, recorded, served), bf16 out;
//   epilogue as the bf16 engine's (residual add, argmax) on the bf16 output.
// kGated leaves its output in e4m3 only (Projection::gated is not written): the down projection
// that follows reads it, and any other projection in between is an internal error, never a read
// of stale memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda_common/cuda_memory.h"
#include "llm/cuda/kernels.h"
#include "llm/device_kernels.h"
#include "llm/linear_op.h"

namespace tunableop::llm::cuda {

class Fp8Projections {
 public:
  // `w_scales`: p.w's per-output-channel scales. `dev` marks the profile's spans.
  Status project(const Projection& p, LinearOp& linear, const float* w_scales, DeviceKernels& dev, Elem e,
                 cudaStream_t s, bool pdl);

 private:
  // Room for rows x width e4m3 values and rows scales. A buffer that grows is kept, not freed:
  // CUDA graphs captured over it still read it.
  Status ensure(int64_t rows, int64_t width, cudaStream_t s);

  ::tunableop::cuda::DeviceBuffer q_, scales_;
  std::vector<::tunableop::cuda::DeviceBuffer> retired_;
  struct Pending {  // gate_up's e4m3 activation, for the down projection that reads p.gated
    const void* gated = nullptr;
    int64_t rows = 0;
  } pending_;
};

}  // namespace tunableop::llm::cuda
