// Skinny GEMM on tensor cores for 2..16 tokens (bf16/fp16, TN), included by gemv_kernel.cuh.
//
// Why: at n = 8 the FMA kernel spends more time converting and multiplying than loading (8
// FMAs and conversions per weight element); mma.sync m16n8k16 does the arithmetic for free and
// the kernel stays a pure weight stream.
//
// Layout trick: a dot product may visit k in any order as long as A and B use the same order.
// Thread (g = lane/4, t = lane%4) loads 16 bytes (8 consecutive k) of weight rows g and g+8 and
// of activation column g; elements 0-3 of those vectors fill its k-slots {2t, 2t+1, 2t+8, 2t+9}
// of one mma, elements 4-7 those of a second. So each 32-element k-chunk is two mmas fed
// straight from 16-byte loads, with no shuffles and no shared memory.
#pragma once

#include <type_traits>

#include "backends/cuda/kernels/gemv_kernel.cuh"

namespace tunableop::cuda::gemv_detail {

template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#endif
}

// One 32-element k-chunk: two mmas per 8-column tile.
template <class T, int NT>
__device__ __forceinline__ void mma_chunk(float (&acc)[NT][4], const uint4& a_lo, const uint4& a_hi,
                                          const uint4 (&b)[NT]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    mma_16816<T>(acc[j], a_lo.x, a_hi.x, a_lo.y, a_hi.y, b[j].x, b[j].y);
    mma_16816<T>(acc[j], a_lo.z, a_hi.z, a_lo.w, a_hi.w, b[j].z, b[j].w);
  }
}

// 8 elements starting at p[0], zero past `valid` (the last, partial k-chunk).
template <class T>
__device__ __forceinline__ uint4 load_partial(const T* p, int64_t valid) {
  static_assert(sizeof(T) == 2, "16-bit types only");
  union {
    uint4 v;
    unsigned short e[8];
  } u;
  u.v = make_uint4(0, 0, 0, 0);
  const auto* bits = reinterpret_cast<const unsigned short*>(p);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < valid) u.e[i] = bits[i];
  return u.v;
}

constexpr int kMmaUnroll = 4;  // k-chunks per warp in flight before the first mma

// Block = SK warps sharing one 16-row tile, splitting its k-chunks; NT 8-column tiles cover
// n <= 8 * NT.
template <class T, int NT, int SK>
__global__ void __launch_bounds__(32 * SK) gemv_mma_kernel(GemvLaunch args) {
  const int lane = threadIdx.x & 31, wk = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  pdl_wait(args.pdl);
  const int64_t bz = blockIdx.y;
  const T* A = static_cast<const T*>(args.a) + bz * args.stride_a;
  const T* B = static_cast<const T*>(args.b) + bz * args.stride_b;
  T* C = static_cast<T*>(args.c) + bz * args.stride_c;
  const int row0 = blockIdx.x * 16;
  // Rows past m and columns past n are clamped: they compute values that are never stored.
  const T* a_lo_row = A + int64_t(min(row0 + g, args.m - 1)) * args.lda;
  const T* a_hi_row = A + int64_t(min(row0 + g + 8, args.m - 1)) * args.lda;
  const T* b_col[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) b_col[j] = B + int64_t(min(j * 8 + g, args.n - 1)) * args.ldb;

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

  // Warp wk takes groups of kMmaUnroll consecutive chunks (groups wk, wk + SK, ...), so the
  // 64-byte pieces it loads per row are adjacent and whole 128-byte lines are consumed at once.
  const int64_t chunks = args.k / 32;
  for (int64_t c0 = int64_t(wk) * kMmaUnroll; c0 < chunks; c0 += int64_t(SK) * kMmaUnroll) {
    uint4 a_lo[kMmaUnroll], a_hi[kMmaUnroll], b[kMmaUnroll][NT];
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u) {
      int64_t c = c0 + u;
      int64_t v = (c < chunks ? c : 0) * 4 + t;  // 16-byte vector index; chunk 0 re-read if past the end
      a_lo[u] = __ldcs(reinterpret_cast<const uint4*>(a_lo_row) + v);
      a_hi[u] = __ldcs(reinterpret_cast<const uint4*>(a_hi_row) + v);
#pragma unroll
      for (int j = 0; j < NT; ++j) b[u][j] = __ldg(reinterpret_cast<const uint4*>(b_col[j]) + v);
    }
#pragma unroll
    for (int u = 0; u < kMmaUnroll; ++u)
      if (c0 + u < chunks) mma_chunk<T, NT>(acc, a_lo[u], a_hi[u], b[u]);  // warp-uniform
  }
  pdl_trigger(args.pdl);
  // The last partial chunk (k % 32 elements), zero-filled, by the last warp.
  const int64_t rest = args.k - chunks * 32;
  if (rest > 0 && wk == SK - 1) {
    int64_t base = chunks * 32 + t * 8, valid = args.k - base;
    uint4 lo = load_partial(a_lo_row + base, valid), hi = load_partial(a_hi_row + base, valid);
    uint4 bb[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) bb[j] = load_partial(b_col[j] + base, valid);
    mma_chunk<T, NT>(acc, lo, hi, bb);
  }

  // acc[j][q]: row g + 8 * (q >= 2), column 8j + 2t + (q & 1).
  auto store = [&](int j, int q, int l, float sum) {
    int row = row0 + (l >> 2) + ((q & 2) ? 8 : 0);
    int col = j * 8 + 2 * (l & 3) + (q & 1);
    if (row >= args.m || col >= args.n) return;
    T* dst = C + int64_t(col) * args.ldc + row;
    float out = args.alpha * sum;
    if (args.beta != 0.f) out = fmaf(args.beta, to_f<T>(*dst), out);  // beta == 0 never reads C
    *dst = from_f<T>(out);
  };
  if constexpr (SK == 1) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) store(j, q, lane, acc[j][q]);
  } else {
    __shared__ float red[SK][NT * 4][32];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) red[wk][j * 4 + q][lane] = acc[j][q];
    __syncthreads();
    for (int idx = threadIdx.x; idx < NT * 4 * 32; idx += 32 * SK) {
      int jq = idx >> 5, l = idx & 31;
      float sum = 0.f;
#pragma unroll
      for (int s = 0; s < SK; ++s) sum += red[s][jq][l];
      store(jq >> 2, jq & 3, l, sum);
    }
  }
}

template <class T, int NT, int SK>
cudaError_t launch_mma(const GemvLaunch& args, cudaStream_t stream) {
  dim3 grid{unsigned((args.m + 15) / 16), unsigned(args.batch), 1};
  return launch_kernel(gemv_mma_kernel<T, NT, SK>, grid, dim3{32 * SK, 1, 1}, stream, args);
}

template <class T, int SK>
cudaError_t launch_mma_nt(const GemvLaunch& args, cudaStream_t stream) {
  return args.n <= 8 ? launch_mma<T, 1, SK>(args, stream) : launch_mma<T, 2, SK>(args, stream);
}

template <class T>
cudaError_t launch_mma_sk(const GemvLaunch& args, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return cudaErrorInvalidValue;  // tensor cores would mean tf32: not offered
  } else {
    switch (args.k_split) {
      case 1: return launch_mma_nt<T, 1>(args, stream);
      case 2: return launch_mma_nt<T, 2>(args, stream);
      case 4: return launch_mma_nt<T, 4>(args, stream);
      case 8: return launch_mma_nt<T, 8>(args, stream);
      case 16: return launch_mma_nt<T, 16>(args, stream);  // few rows, long k: 16 warps per tile
    }
    return cudaErrorInvalidValue;
  }
}

}  // namespace tunableop::cuda::gemv_detail
