// Copies between column-major layouts on the device (padded buffers <-> the caller's matrices).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tunableop/status.h"

namespace tunableop::cuda {

// Copies `rows` x `cols` of each of `batch` matrices (element size `es`, leading dimensions
// ldd/lds, batch strides sd/ss in elements) on `stream`. Writes nothing outside those elements.
Status copy_matrices(void* dst, int64_t ldd, int64_t sd, const void* src, int64_t lds, int64_t ss, int64_t rows,
                     int64_t cols, int64_t batch, size_t es, cudaStream_t stream);

}  // namespace tunableop::cuda
