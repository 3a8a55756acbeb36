// CUDA kernel of the tensor-parallel engine: one block of a random-weight tensor generated on
// the GPU with the values the whole tensor has there (each weight is a pure function of its
// index in the full tensor, random_hash.h), so a rank never makes the parts it does not hold.
// Plain C++17 with the CUDA runtime only, like llm/cuda/kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::llm::cuda {

// dst[i * cols + j] = E(offset + scale * random_uniform(seed, stream_id, (row0 + i) * full_cols
// + col0 + j)) for i < rows, j < cols; `bf16` picks E (bf16, else fp32).
cudaError_t fill_random_block(bool bf16, void* dst, int64_t rows, int64_t cols, int64_t full_cols, int64_t row0,
                              int64_t col0, uint64_t seed, uint64_t stream_id, float scale, float offset,
                              cudaStream_t s);

}  // namespace tunableop::llm::cuda
