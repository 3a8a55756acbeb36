// CUDA runtime errors as Status, shared by the CUDA backend and the LLM engine's CUDA device.
// Depends only on the CUDA runtime and core's Status.
#pragma once

#include <cuda_runtime.h>

#include "tunableop/status.h"

namespace tunableop::cuda {

// "cudaMalloc(...): out of memory (cudaErrorMemoryAllocation)"; ok for cudaSuccess.
Status cuda_status(cudaError_t err, const char* what);

#define TUNABLEOP_CUDA_TRY(expr) TUNABLEOP_RETURN_IF_ERROR(::tunableop::cuda::cuda_status((expr), #expr))

// After a kernel launch: the launch error (bad configuration, missing kernel image) if any.
Status check_launch(const char* kernel_name);

}  // namespace tunableop::cuda
