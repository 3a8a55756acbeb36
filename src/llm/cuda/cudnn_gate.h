// Prefill's gate GEMM with the gated activation in its epilogue (issue 12), through cuDNN 9's
// backend graph API, the library opened at run time (dlopen: $TUNABLEOP_CUDNN_LIBRARY, else
// libcudnn.so.9); without it the engine keeps its unfused path. The graph:
//   g = x W_gate^T (matmul, fp32), a = act(g) (GELU tanh, GELU erf or SiLU; fp32),
//   out = a * up (pointwise MUL with the E tensor `up`, out in E)
// x [rows, in], W_gate the first `n` rows of w_gate_up [2n, in] (the gate half, no copy), up and
// out [rows, n], all row-major in bf16. `up` comes from a GEMM over the up half (the engine's
// GEMM op): with the gate the activation pass's 2n-wide read of gate_up is gone.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cuda_common/cuda_memory.h"
#include "llm/cuda/kernels.h"
#include "tunableop/status.h"

namespace tunableop::llm::cuda {

class CudnnGate {
 public:
  CudnnGate() = default;
  ~CudnnGate();
  CudnnGate(const CudnnGate&) = delete;
  CudnnGate& operator=(const CudnnGate&) = delete;

  // out = act(x W_gate^T) * up (bf16; see above), on `stream`. Unsupported where cuDNN is missing
  // or offers no engine for the graph (the first call per shape builds the plan).
  Status run(cudaStream_t stream, Act act, int64_t rows, int64_t in, int64_t n, const void* x, const void* w_gate,
             const void* up, void* out);

 private:
  struct Plan;
  void* handle_ = nullptr;  // cudnnHandle_t
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::shared_ptr<Plan>> plans_;
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, Status> failed_;
  ::tunableop::cuda::DeviceBuffer workspace_;
};

}  // namespace tunableop::llm::cuda
