// Device-side comparison of two outputs (C++17: included by .cu files).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tunableop/types.h"

namespace tunableop::cuda {

// Accumulates, over the m x n matrices of `batch` column-major outputs, sum((c - ref)^2) into
// sums[0], sum(ref^2) into sums[1], and 1.0 into sums[2] if any element of c is NaN or Inf.
// `sums` (3 doubles, device memory) must be zeroed by the caller.
cudaError_t launch_squared_error(DType dtype, const void* c, const void* ref, int64_t m, int64_t n, int64_t ldc,
                                 int64_t batch, int64_t stride_c, double* sums, cudaStream_t stream);

}  // namespace tunableop::cuda
