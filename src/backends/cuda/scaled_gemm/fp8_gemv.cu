// The FP8 decode kernel (fp8_kernels.h): TN, e4m3 x e4m3, n <= 16. A block is G groups of SK
// warps; group g owns R rows of C and its SK warps stride over k together with 16-byte
// streaming loads of A (each byte read once), convert 16 fp8 values at a time to fp32, share
// each B vector (one per token, from L1/L2) across the R rows, and reduce across the SK warps
// in shared memory. Scales, bias and the output's rounding in the epilogue.
#include "backends/cuda/common/warp_group_store.cuh"
#include "backends/cuda/scaled_gemm/fp8_elem.cuh"

namespace tunableop::cuda {

namespace {

template <int R, int NT, int SK, int G>
__global__ void __launch_bounds__(32 * SK * G) fp8_gemv_kernel(Fp8Launch args) {
  constexpr int kThreads = 32 * SK;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = warp / SK, wk = warp % SK;
  const int t = wk * 32 + lane;
  const auto* A = static_cast<const uint8_t*>(args.a);
  const auto* B = static_cast<const uint8_t*>(args.b);
  const int64_t row0 = (int64_t(blockIdx.x) * G + g) * R;
  const uint4* arow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(row0 + r, args.m - 1);  // clamped rows compute what is never stored
    arow[r] = reinterpret_cast<const uint4*>(A + row * args.lda);
  }
  const int n = int(args.n);
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[r][j] = 0.f;

  const int64_t kv = args.k / 16;
  for (int64_t v = t; v < kv; v += kThreads) {
    float af[R][16];
#pragma unroll
    for (int r = 0; r < R; ++r) fp8_detail::e4m3x16_to_f(__ldcs(arow[r] + v), af[r]);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (j < n) {
        float bf[16];
        fp8_detail::e4m3x16_to_f(__ldg(reinterpret_cast<const uint4*>(B + int64_t(j) * args.ldb) + v), bf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < 16; ++e) acc[r][j] = fmaf(af[r][e], bf[e], acc[r][j]);
      }
    }
  }
  // k tail (k % 16 elements), one at a time.
  for (int64_t e = kv * 16 + t; e < args.k; e += kThreads) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float a = fp8_detail::fp8_to_f(reinterpret_cast<const uint8_t*>(arow[r])[e], false);
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (j < n) acc[r][j] = fmaf(a, fp8_detail::fp8_to_f(B[int64_t(j) * args.ldb + e], false), acc[r][j]);
    }
  }
  auto store = [&](int r, int j, float sum) {
    const int64_t row = row0 + r;
    if (row < args.m && j < n) fp8_detail::store_output(args, row, j, sum);
  };
  warp_group_store<R, NT, SK, G>(acc, lane, g, wk, store);
}

// At least 4 warps per block, so that one-warp groups do not hit the blocks-per-SM limit first.
constexpr int groups_for(int sk) { return sk >= 4 ? 1 : 4 / sk; }

template <int R, int NT, int SK>
cudaError_t launch(const Fp8Launch& args, cudaStream_t stream) {
  constexpr int G = groups_for(SK);
  const int64_t blocks = (args.m + R * G - 1) / (R * G);
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  fp8_gemv_kernel<R, NT, SK, G><<<unsigned(blocks), 32 * SK * G, 0, stream>>>(args);
  return cudaGetLastError();
}

template <int R, int SK>
cudaError_t launch_nt(const Fp8Launch& args, cudaStream_t stream) {
  if (args.n <= 1) return launch<R, 1, SK>(args, stream);
  if (args.n <= 2) return launch<R, 2, SK>(args, stream);
  if (args.n <= 4) return launch<R, 4, SK>(args, stream);
  if (args.n <= 8) return launch<R, 8, SK>(args, stream);
  return launch<R, 16, SK>(args, stream);
}

template <int R>
cudaError_t launch_sk(const Fp8Launch& args, cudaStream_t stream) {
  switch (args.k_split) {
    case 1: return launch_nt<R, 1>(args, stream);
    case 2: return launch_nt<R, 2>(args, stream);
    case 4: return launch_nt<R, 4>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t fp8_gemv_launch(const Fp8Launch& args, cudaStream_t stream) {
  if (args.m == 0 || args.n == 0) return cudaSuccess;
  if (args.n > kFp8GemvMaxN || !args.transa || args.transb || args.a_e5m2 || args.b_e5m2) return cudaErrorInvalidValue;
  switch (args.rows) {
    case 1: return launch_sk<1>(args, stream);
    case 2: return launch_sk<2>(args, stream);
    case 4: return launch_sk<4>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
