// The end of a skinny kernel's warp group (kernels/gemv_kernel.cuh, scaled_gemm/fp8_gemv.cu):
// every lane holds partial sums acc[R][NT] of R rows and NT columns; they are summed across the
// warp, then across the group's SK warps through shared memory, and store(r, j, sum) is called
// once per output. With one warp per group the stores are spread over lanes with compile-time
// register indices (no local memory).
#pragma once

namespace tunableop::cuda {

template <int R, int NT, int SK, int G, class Store>
__device__ __forceinline__ void warp_group_store(float (&acc)[R][NT], int lane, int g, int wk, Store&& store) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[r][j] += __shfl_xor_sync(0xffffffffu, acc[r][j], off);
  if constexpr (SK == 1) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (lane == (r * NT + j) % 32) store(r, j, acc[r][j]);
  } else {
    __shared__ float red[G][SK][R * NT];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < NT; ++j) red[g][wk][r * NT + j] = acc[r][j];
    }
    __syncthreads();
    if (wk == 0) {
      for (int idx = lane; idx < R * NT; idx += 32) {
        float sum = 0.f;
#pragma unroll
        for (int s = 0; s < SK; ++s) sum += red[g][s][idx];
        store(idx / NT, idx % NT, sum);
      }
    }
  }
}

}  // namespace tunableop::cuda
