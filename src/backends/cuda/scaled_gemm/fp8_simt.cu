// The generic FP8 kernel (fp8_kernels.h): 64 x 64 tiles of C per 256-thread block, each thread
// 4 x 4 of them; k in slices of 32 staged in shared memory as fp32. Any layout, either fp8
// type, fp32 accumulation.
#include "backends/cuda/scaled_gemm/fp8_elem.cuh"

namespace tunableop::cuda {

namespace {

constexpr int kTile = 64, kSlice = 32, kThreads = 256;

__global__ void __launch_bounds__(kThreads) fp8_simt_kernel(Fp8Launch args) {
  __shared__ float as[kSlice][kTile + 1];
  __shared__ float bs[kSlice][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = int64_t(blockIdx.x) * kTile, col0 = int64_t(blockIdx.y) * kTile;
  const auto* A = static_cast<const uint8_t*>(args.a);
  const auto* B = static_cast<const uint8_t*>(args.b);
  float acc[4][4] = {};
  for (int64_t l0 = 0; l0 < args.k; l0 += kSlice) {
    // Each thread stages 8 elements of each slice (zeros outside the matrices).
    for (int e = threadIdx.x; e < kSlice * kTile; e += kThreads) {
      const int l = e % kSlice, x = e / kSlice;
      const int64_t kk = l0 + l, i = row0 + x, j = col0 + x;
      float av = 0.f, bv = 0.f;
      if (kk < args.k && i < args.m)
        av = fp8_detail::fp8_to_f(A[args.transa ? kk + i * args.lda : i + kk * args.lda], args.a_e5m2);
      if (kk < args.k && j < args.n)
        bv = fp8_detail::fp8_to_f(B[args.transb ? j + kk * args.ldb : kk + j * args.ldb], args.b_e5m2);
      as[l][x] = av;
      bs[l][x] = bv;
    }
    __syncthreads();
#pragma unroll 8
    for (int l = 0; l < kSlice; ++l) {
      float ar[4], br[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) ar[r] = as[l][ty + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; ++c) br[c] = bs[l][tx + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(ar[r], br[c], acc[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t i = row0 + ty + 16 * r, j = col0 + tx + 16 * c;
      if (i < args.m && j < args.n) fp8_detail::store_output(args, i, j, acc[r][c]);
    }
}

}  // namespace

cudaError_t fp8_simt_launch(const Fp8Launch& args, cudaStream_t stream) {
  const int64_t gx = (args.m + kTile - 1) / kTile, gy = (args.n + kTile - 1) / kTile;
  if (gx == 0 || gy == 0) return cudaSuccess;
  if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
  fp8_simt_kernel<<<dim3(unsigned(gx), unsigned(gy)), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace tunableop::cuda
