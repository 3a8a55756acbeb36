#include "llm/parallel/shard_kernels.h"

#include <cuda_bf16.h>

#include "cuda_common/elem.cuh"
#include "llm/random_hash.h"

namespace tunableop::llm::cuda {
namespace {

using ::tunableop::cuda::from_f;

template <class E>
__global__ void fill_random_block_kernel(E* dst, int64_t rows, int64_t cols, int64_t full_cols, int64_t row0,
                                         int64_t col0, uint64_t seed, uint64_t stream_id, float scale, float offset) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const uint64_t index = uint64_t((row0 + r) * full_cols + col0 + c);
    dst[i] = from_f<E>(offset + scale * random_uniform(seed, stream_id, index));
  }
}

}  // namespace

cudaError_t fill_random_block(bool bf16, void* dst, int64_t rows, int64_t cols, int64_t full_cols, int64_t row0,
                              int64_t col0, uint64_t seed, uint64_t stream_id, float scale, float offset,
                              cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  const unsigned grid = unsigned(blocks < 65535 * 16 ? blocks : 65535 * 16);
  if (bf16) {
    fill_random_block_kernel<<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), rows, cols, full_cols, row0, col0,
                                                  seed, stream_id, scale, offset);
  } else {
    fill_random_block_kernel<<<grid, 256, 0, s>>>(static_cast<float*>(dst), rows, cols, full_cols, row0, col0, seed,
                                                  stream_id, scale, offset);
  }
  return cudaGetLastError();
}

}  // namespace tunableop::llm::cuda
