// Prefill's gate GEMM with the gated activation in its epilogue (issue 12), through cuDNN 9's
// backend graph API, the library opened at run time (dlopen: $TUNABLEOP_CUDNN_LIBRARY, else
// libcudnn.so.9); without it the engine keeps its unfused path. The graph:
//   g = x W_gate^T (matmul, fp32), a = act(g) (GELU tanh, GELU erf or SiLU; fp32),
//   out = a * up (pointwise MUL with the E tensor `up`, out in E)
// x [rows, in], W_gate the first `n` rows of w_gate_up [2n, in] (the gate half, no copy), up and
// out [rows, n], all row-major in bf16. `up` comes from a GEMM over the up half (the engine's
// GEMM op): with the gate the activation pass's 2n-wide read of gate_up is gone.
//
// cuDNN offers several engine configurations for the graph (its heuristics' mode A list, then
// its fallback list); their speed differs by ~15% on the engine's shapes (issue 12, H100:
// 201-230 us for Gemma-2B's gate), so the engine times them all and keeps the fastest. Each is
// named by a tag that stays the same across processes with the same cuDNN:
// "eng<global index>" plus "_k<knob type>v<value>" per knob choice.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

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

  // cuDNN's version (cudnnGetVersion, e.g. 91900); 0 where it is not loaded.
  static int64_t version();

  // The tags of the engine configurations whose execution plan builds for this shape, in the
  // order cuDNN offers them (mode A, then fallback; a configuration both lists offer once).
  // `only` non-empty: builds just the configuration with that tag (a choice read back from a
  // results file); `limit` > 0: stops after that many plans. Plans are kept per shape; a later
  // call builds what an earlier one skipped. Unsupported where cuDNN is missing or no plan builds.
  StatusOr<std::vector<std::string>> configs(Act act, int64_t rows, int64_t in, int64_t n, const std::string& only = "",
                                             int limit = 0);

  // Drops the plans of this shape's other configurations than `tag` (all of them for an empty
  // tag) once a choice is made: their kernels and descriptors are not kept for the process's
  // life. configs() builds them again if asked.
  void keep_only(Act act, int64_t rows, int64_t in, int64_t n, const std::string& tag);

  // out = act(x W_gate^T) * up (bf16; see above), on `stream`, with the configuration tagged
  // `tag` (built by configs()); an empty tag: the first configuration that builds.
  Status run(cudaStream_t stream, Act act, int64_t rows, int64_t in, int64_t n, const void* x, const void* w_gate,
             const void* up, void* out, const std::string& tag = "");

 private:
  struct Plan;
  struct Shape;
  using Key = std::tuple<int, int64_t, int64_t, int64_t>;
  Status ensure_handle();
  void* handle_ = nullptr;  // cudnnHandle_t
  std::map<Key, std::shared_ptr<Shape>> shapes_;
  ::tunableop::cuda::DeviceBuffer workspace_;
};

}  // namespace tunableop::llm::cuda
