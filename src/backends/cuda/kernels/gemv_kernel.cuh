// Skinny GEMM kernels (n <= 16, TN), included once per dtype by gemv_<dtype>.cu so that the
// ~60 instantiations per dtype compile in parallel. Memory-bound by design: every byte of A (the
// weight) is read exactly once with 16-byte streaming loads; B (a few activation columns) is
// re-read by every block through L1/L2 and costs no device-memory bandwidth.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backends/cuda/common/warp_group_store.cuh"
#include "backends/cuda/kernels/gemv_launch.h"
#include "cuda_common/elem.cuh"

namespace tunableop::cuda::gemv_detail {

// acc += dot(a, b) over the 16 bytes of two vectors.
template <class T>
__device__ __forceinline__ float dot16(const uint4& a, const uint4& b, float acc);

template <>
__device__ __forceinline__ float dot16<float>(const uint4& a, const uint4& b, float acc) {
  acc = fmaf(__uint_as_float(a.x), __uint_as_float(b.x), acc);
  acc = fmaf(__uint_as_float(a.y), __uint_as_float(b.y), acc);
  acc = fmaf(__uint_as_float(a.z), __uint_as_float(b.z), acc);
  acc = fmaf(__uint_as_float(a.w), __uint_as_float(b.w), acc);
  return acc;
}

// bf16 -> fp32 is a shift: the low half of a word moves up, the high half is masked.
__device__ __forceinline__ float bf16_dot2(uint32_t a, uint32_t b, float acc) {
  acc = fmaf(__uint_as_float(a << 16), __uint_as_float(b << 16), acc);
  acc = fmaf(__uint_as_float(a & 0xffff0000u), __uint_as_float(b & 0xffff0000u), acc);
  return acc;
}
template <>
__device__ __forceinline__ float dot16<__nv_bfloat16>(const uint4& a, const uint4& b, float acc) {
  acc = bf16_dot2(a.x, b.x, acc);
  acc = bf16_dot2(a.y, b.y, acc);
  acc = bf16_dot2(a.z, b.z, acc);
  acc = bf16_dot2(a.w, b.w, acc);
  return acc;
}

__device__ __forceinline__ float half_dot2(uint32_t a, uint32_t b, float acc) {
  float2 fa = __half22float2(*reinterpret_cast<const __half2*>(&a));
  float2 fb = __half22float2(*reinterpret_cast<const __half2*>(&b));
  acc = fmaf(fa.x, fb.x, acc);
  acc = fmaf(fa.y, fb.y, acc);
  return acc;
}
template <>
__device__ __forceinline__ float dot16<__half>(const uint4& a, const uint4& b, float acc) {
  acc = half_dot2(a.x, b.x, acc);
  acc = half_dot2(a.y, b.y, acc);
  acc = half_dot2(a.z, b.z, acc);
  acc = half_dot2(a.w, b.w, acc);
  return acc;
}

constexpr int kUnroll = 2;  // vectors per thread in flight per row before the first use

// Programmatic dependent launch (sm_90): with args.pdl the kernel may be launched while the
// previous kernel in the stream is still running; it waits here, before touching any global
// memory, until that kernel has completed and its writes are visible. So only the launch
// latency overlaps, never data: safe whatever the previous kernel wrote.
__device__ __forceinline__ void pdl_wait(int on) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (on) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel in the stream start launching (it still waits for our completion).
__device__ __forceinline__ void pdl_trigger(int on) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (on) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... Args>
cudaError_t launch_kernel(void (*kernel)(Args...), dim3 grid, dim3 block, cudaStream_t stream, const GemvLaunch& args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = args.pdl ? attr : nullptr;
  cfg.numAttrs = args.pdl ? 1 : 0;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args);
  return e != cudaSuccess ? e : cudaGetLastError();
}

// Block = G groups of SK warps; group g owns rows [row0 + g*R, +R); its SK warps stride over K
// together (coalesced 16-byte loads), then reduce through shared memory.
template <class T, int R, int NT, int SK, int G>
__global__ void __launch_bounds__(32 * SK * G) gemv_tn_kernel(GemvLaunch args) {
  constexpr int V = 16 / sizeof(T);
  constexpr int kThreads = 32 * SK;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = warp / SK, wk = warp % SK;
  const int t = wk * 32 + lane;  // index inside the group
  pdl_wait(args.pdl);
  const int64_t bz = blockIdx.y;
  const T* A = static_cast<const T*>(args.a) + bz * args.stride_a;
  const T* B = static_cast<const T*>(args.b) + bz * args.stride_b;
  T* C = static_cast<T*>(args.c) + bz * args.stride_c;
  const int row0 = (blockIdx.x * G + g) * R;

  const uint4* arow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int row = min(row0 + r, args.m - 1);  // clamped rows compute garbage that is never stored
    arow[r] = reinterpret_cast<const uint4*>(A + int64_t(row) * args.lda);
  }
  const int n = args.n;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[r][j] = 0.f;

  const int64_t kv = args.k / V;
  for (int64_t v0 = t; v0 < kv; v0 += int64_t(kUnroll) * kThreads) {
    uint4 av[kUnroll][R];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = v0 + int64_t(u) * kThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) av[u][r] = v < kv ? __ldcs(arow[r] + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int64_t v = v0 + int64_t(u) * kThreads;
      if (v >= kv) break;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j < n) {
          uint4 bv = __ldg(reinterpret_cast<const uint4*>(B + int64_t(j) * args.ldb) + v);
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r][j] = dot16<T>(av[u][r], bv, acc[r][j]);
        }
      }
    }
  }
  pdl_trigger(args.pdl);
  // K tail (k % V elements), scalar.
  for (int64_t e = kv * V + t; e < args.k; e += kThreads) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float a = to_f<T>(reinterpret_cast<const T*>(arow[r])[e]);
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (j < n) acc[r][j] = fmaf(a, to_f<T>(B[int64_t(j) * args.ldb + e]), acc[r][j]);
    }
  }

  auto store = [&](int r, int j, float sum) {
    int row = row0 + r;
    if (row >= args.m || j >= n) return;
    T* dst = C + int64_t(j) * args.ldc + row;
    float out = args.alpha * sum;
    if (args.beta != 0.f) out = fmaf(args.beta, to_f<T>(*dst), out);  // beta == 0 never reads C
    *dst = from_f<T>(out);
  };

  warp_group_store<R, NT, SK, G>(acc, lane, g, wk, store);
}

// Warp groups per block: at least 4 warps per block so that a block of one-warp groups does
// not hit the 32-blocks-per-SM limit before the thread limit.
constexpr int groups_for(int sk) { return sk >= 4 ? 1 : 4 / sk; }

template <class T, int R, int NT, int SK>
cudaError_t launch(const GemvLaunch& args, cudaStream_t stream) {
  constexpr int G = groups_for(SK);
  int64_t blocks = (int64_t(args.m) + R * G - 1) / (R * G);
  dim3 grid{unsigned(blocks), unsigned(args.batch), 1};
  return launch_kernel(gemv_tn_kernel<T, R, NT, SK, G>, grid, dim3{32 * SK * G, 1, 1}, stream, args);
}

template <class T, int R, int SK>
cudaError_t launch_nt(const GemvLaunch& args, cudaStream_t stream) {
  if (args.n <= 1) return launch<T, R, 1, SK>(args, stream);
  if (args.n <= 2) return launch<T, R, 2, SK>(args, stream);
  if (args.n <= 4) return launch<T, R, 4, SK>(args, stream);
  if (args.n <= 8) return launch<T, R, 8, SK>(args, stream);
  return launch<T, R, 16, SK>(args, stream);
}

template <class T, int R>
cudaError_t launch_sk(const GemvLaunch& args, cudaStream_t stream) {
  switch (args.k_split) {
    case 1: return launch_nt<T, R, 1>(args, stream);
    case 2: return launch_nt<T, R, 2>(args, stream);
    case 4: return launch_nt<T, R, 4>(args, stream);
    case 8: return launch_nt<T, R, 8>(args, stream);
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch_mma_sk(const GemvLaunch& args, cudaStream_t stream);  // gemv_mma.cuh

template <class T>
cudaError_t launch_rows(const GemvLaunch& args, cudaStream_t stream) {
  if (args.mma) return launch_mma_sk<T>(args, stream);
  switch (args.rows) {
    case 1: return launch_sk<T, 1>(args, stream);
    case 2: return launch_sk<T, 2>(args, stream);
    case 4: return launch_sk<T, 4>(args, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda::gemv_detail
