// Small helpers of the CUDA backend: turning cuBLAS error codes into Status, mapping our dtypes
// to CUDA's, and the per-(device, thread) cuBLAS / cuBLASLt handles. CUDA runtime errors
// (cuda_status, TUNABLEOP_CUDA_TRY, check_launch) come from src/cuda_common, shared with the
// LLM engine.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::cuda {

// "cublasLtMatmul(...): the requested functionality is not supported (CUBLAS_STATUS_NOT_SUPPORTED)"
Status cublas_status(cublasStatus_t st, const char* what);

#define TUNABLEOP_CUBLAS_TRY(expr) TUNABLEOP_RETURN_IF_ERROR(::tunableop::cuda::cublas_status((expr), #expr))

// Handles of the current device for the calling thread, created on first use. cuBLAS handles
// are not safe to share between threads that run concurrently, and are bound to the device
// that was current when they were made, so they are cached per (device, thread).
struct Handles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
};
StatusOr<Handles> current_handles();

struct CudaTypes {
  cudaDataType_t data;          // A, B (and C unless `out` differs)
  cudaDataType_t scale;         // alpha, beta
  cublasComputeType_t compute;  // accumulation
  cudaDataType_t out;           // C (and D): `data`, or 32F for a wider C (GemmParams::out_dtype)
};
// fp32 -> 32F (or 32F_FAST_TF32 when p.allow_tf32), bf16/fp16 -> 32F accumulation, fp64 -> 64F.
CudaTypes cuda_types(const GemmParams& p);

// alpha and beta in the scale type's representation (float or double), for host pointer mode.
struct Scalars {
  union {
    float f;
    double d;
  } alpha, beta;
};
Scalars make_scalars(const GemmParams& p);

// Static facts about the current device, read once per device.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t l2_bytes = 0;
};
StatusOr<DeviceInfo> current_device_info();

// Grow-only device blocks per (device, stream), for one thread (hold it thread_local). An
// outgrown block is kept until the object dies (thread exit), never freed earlier: a captured
// CUDA graph (the engine's decode step or prefill) holds the pointer it was captured with, and a
// later, larger problem growing the workspace must not free it under the graph.
class RetainedBlocks {
 public:
  RetainedBlocks() = default;
  RetainedBlocks(const RetainedBlocks&) = delete;
  RetainedBlocks& operator=(const RetainedBlocks&) = delete;
  ~RetainedBlocks();  // frees each block on its device, unless the runtime is already gone
  // The current block of (current device, stream) when it holds `bytes`, else a new one of
  // max(bytes, twice the current): doubling keeps what the outgrown ones hold below its size.
  StatusOr<void*> get(size_t bytes, void* stream);
  // The blocks of (current device, stream), the last one current, for a caller that grows
  // them its own way.
  StatusOr<std::vector<DeviceBuffer>*> blocks(void* stream);

 private:
  std::map<std::pair<int, void*>, std::vector<DeviceBuffer>> by_stream_;
};

// Workspace for ordinary dispatch, where the op passes none (GemmOperands::workspace null): a
// grow-only buffer per (thread, device, stream), freed at thread exit. Per stream so that work
// queued on two streams never shares scratch memory; an outgrown block is kept (not freed) until
// the thread exits, since a captured CUDA graph may still point at it.
StatusOr<void*> scratch_workspace(size_t bytes, void* stream);

// The workspace a candidate should use: the op's when it gave one of at least `bytes`, else the
// scratch buffer above.
StatusOr<void*> workspace_for(const GemmOperands& o, size_t bytes);

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace tunableop::cuda
