// The fused decode projection kernel (see fused_gemv.h), included by one fused_gemv_<epilogue>.cu
// per (input, output) pair so that their instantiations compile in parallel.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "backends/cuda/fused_linear/fused_gemv.h"
#include "cuda_common/elem.cuh"
#include "cuda_common/gated_act.cuh"
#include "cuda_common/pdl.cuh"
#include "cuda_common/rope.cuh"

namespace tunableop::cuda::fused {

using ::tunableop::cuda::from_f;
using ::tunableop::cuda::to_f;

constexpr int kThreads = 256;  // 8 warps per block
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // 16-byte vectors per lane and row in flight before the first use

// 16 bytes of T, widened to floats.
template <class T>
struct Vec16;
template <>
struct Vec16<float> {
  static constexpr int V = 4;
  __device__ static void unpack(const uint4& u, float (&f)[4]) {
    f[0] = __uint_as_float(u.x);
    f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z);
    f[3] = __uint_as_float(u.w);
  }
  __device__ static uint4 pack(const float (&f)[4]) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
};
template <>
struct Vec16<__nv_bfloat16> {
  static constexpr int V = 8;
  // bf16 -> fp32 is a shift: the low half of a word moves up, the high half is masked.
  __device__ static void unpack(const uint4& u, float (&f)[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ static uint4 pack(const float (&f)[8]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i]));
      const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i + 1]));
      w[i] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Orders (value, index) pairs by value, then by the smaller index, as one unsigned integer
// (torch.argmax: the first maximum). NaN never wins (as in argmax_kernel), -0 equals +0.
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t idx) {
  if (v != v) return 0ull;
  const uint32_t u = v == 0.f ? 0u : __float_as_uint(v);
  const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(ord) << 32) | (0xffffffffu - static_cast<uint32_t>(idx));
}

// kRope: element offset of (seq, kv head, pos) in the layer's K (or V) cache, -1 when not stored
// (a paged cache's row past its sequence's length); as the engine's rope_store kernel.
__device__ __forceinline__ int64_t rope_cache_offset(const GemvRope& r, int64_t seq, int64_t head, int64_t pos) {
  if (!r.block_table) return ((seq * r.n_kv_heads + head) * r.max_seq + pos) * r.head_dim;
  if (pos >= r.seq_lens[seq]) return -1;
  const int64_t page = r.block_table[seq * r.pages_per_seq + pos / r.page_size];
  return ((page * r.n_kv_heads + head) * r.page_size + pos % r.page_size) * r.head_dim;
}

// Block = kWarps / SK warp groups of SK warps. Group g takes units base + g for base = block * G,
// block * G + grid * G, ... (the same trip count in every group of a block, so the block may
// synchronise inside the loop). A unit is P output rows: R weight rows (kGated: the P gate rows
// and their P up rows; kRope: P rotation pairs, the first halves then the second halves).
template <class T, int NT, int R, int SK, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kThreads) fused_gemv_kernel(FusedGemvArgs a) {
  constexpr int V = Vec16<T>::V;
  constexpr int G = kWarps / SK;
  constexpr bool kPairs = OUT == GemvOut::kGated || OUT == GemvOut::kRope;
  constexpr int P = kPairs ? R / 2 : R;
  static_assert(!kPairs || R % 2 == 0, "gated and rope units pair rows");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* bs = reinterpret_cast<T*>(smem_raw);  // kNorm: the normalised input [n][k]
  __shared__ float red[SK > 1 ? G * SK * R * NT : 1];
  __shared__ float scratch[kWarps][NT];
  __shared__ float inv_rms[NT];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = warp / SK, wk = warp % SK;
  const int n = a.n;
  const int64_t k = a.k, kv = k / V;
  const int64_t rows_out = kPairs ? a.m / 2 : a.m;  // kRope: pairs
  const int64_t units = (rows_out + P - 1) / P;
  const int64_t half = a.rope.head_dim / 2;  // kRope
  const T* W = static_cast<const T*>(a.w);
  const int64_t chunk = int64_t(kUnroll) * 32 * SK;  // vectors of a row per chunk (the whole group)
  const int64_t nchunks = (kv + chunk - 1) / chunk;

  const uint4* wrow[R];
  auto set_rows = [&](int64_t unit) {
    const int64_t u = unit < units ? unit : units - 1;  // past the end: recompute the last unit, store nothing
#pragma unroll
    for (int r = 0; r < R; ++r) {
      int64_t idx;
      if constexpr (OUT == GemvOut::kGated) {
        int64_t o = u * P + (r % P);
        if (o >= rows_out) o = rows_out - 1;
        idx = r < P ? o : rows_out + o;
      } else if constexpr (OUT == GemvOut::kRope) {
        int64_t o = u * P + (r % P);  // pair o: rows i and i + half of head o / half
        if (o >= rows_out) o = rows_out - 1;
        const int64_t head = o / half;
        idx = head * a.rope.head_dim + (o - head * half) + (r < P ? 0 : half);
      } else {
        idx = u * P + r;
        if (idx >= a.m) idx = a.m - 1;
      }
      wrow[r] = reinterpret_cast<const uint4*>(W + idx * k);
    }
  };
  uint4 av[kUnroll][R];
  auto load = [&](int64_t c) {
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int64_t v = c * chunk + int64_t(i) * 32 * SK + wk * 32 + lane;
#pragma unroll
      for (int r = 0; r < R; ++r) av[i][r] = v < kv ? __ldcs(wrow[r] + v) : make_uint4(0, 0, 0, 0);
    }
  };

  int64_t base = int64_t(blockIdx.x) * G;
  const int64_t stride = int64_t(gridDim.x) * G;
  // The weights never change during a step: with the early PDL trigger the first chunk is in
  // flight before we wait for the previous kernel, which may still be running; with the late
  // one, right after (during the prologue).
  set_rows(base + g);
  if (!a.pdl_late) load(0);
  ::tunableop::cuda::pdl_wait();
  if (a.pdl_late) {
    load(0);  // still in flight during the prologue
  } else {
    ::tunableop::cuda::pdl_launch_dependents();
  }

  if constexpr (IN == GemvIn::kNorm) {
    // rmsnorm of each token's residual row, rounded to E as the rmsnorm kernel rounds it.
    const float4* x4 = reinterpret_cast<const float4*>(a.x);
    const int64_t k4 = k / 4;
    float ss[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      ss[j] = 0.f;
      if (j < n) {
        for (int64_t i = threadIdx.x; i < k4; i += kThreads) {
          const float4 v = x4[j * k4 + i];
          ss[j] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
      }
      ss[j] = warp_sum(ss[j]);
      if (lane == 0) scratch[warp][j] = ss[j];
    }
    __syncthreads();
    if (threadIdx.x < NT) {
      float t = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) t += scratch[w][threadIdx.x];
      inv_rms[threadIdx.x] = rsqrtf(t / float(k) + a.eps);
    }
    __syncthreads();
    const T* nw = static_cast<const T*>(a.norm_w);
    for (int64_t idx = threadIdx.x; idx < int64_t(n) * kv; idx += kThreads) {
      const int64_t j = idx / kv, v = idx - j * kv;
      float xs[V], ws[V], o[V];
      const float4* xr = x4 + j * k4 + v * (V / 4);
#pragma unroll
      for (int q = 0; q < V / 4; ++q) {
        const float4 f = xr[q];
        xs[4 * q] = f.x, xs[4 * q + 1] = f.y, xs[4 * q + 2] = f.z, xs[4 * q + 3] = f.w;
      }
      Vec16<T>::unpack(__ldg(reinterpret_cast<const uint4*>(nw) + v), ws);
      const float inv = inv_rms[j];
#pragma unroll
      for (int e = 0; e < V; ++e) o[e] = xs[e] * inv * (a.add_one ? 1.0f + ws[e] : ws[e]);
      reinterpret_cast<uint4*>(bs + j * k)[v] = Vec16<T>::pack(o);
    }
    __syncthreads();
  }
  const T* in = static_cast<const T*>(a.input);

  float best_v[NT];  // kArgmax: this thread's best (value, row) per column
  int64_t best_i[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) best_v[j] = -FLT_MAX, best_i[j] = -1;

  for (bool first = true; base < units; base += stride, first = false) {
    const int64_t unit = base + g;
    if (!first) {
      set_rows(unit);
      load(0);
    }
    // Late trigger: once this block's last unit is loading, the next kernel may fill the SMs.
    if (a.pdl_late && base + stride >= units) ::tunableop::cuda::pdl_launch_dependents();
    // kRope: the epilogue's lane p * NT + j (P * NT <= 16) looks up its pair's position, cos, sin
    // and cache slot now, so that the loads overlap the weights' stream (after pdl_wait: the
    // positions and tables are the step's inputs).
    float rope_c = 1.f, rope_s = 0.f;
    int64_t rope_off = -1;
    if constexpr (OUT == GemvOut::kRope) {
      static_assert(P * NT <= 32, "one (pair, token) per lane");
      const int64_t row = unit * P + lane / NT;
      const int j = lane % NT;
      if (wk == 0 && lane < P * NT && j < n && unit < units && row < rows_out) {
        const GemvRope& rp = a.rope;
        const int64_t head = row / half, i = row - head * half, pos = rp.positions[j];
        if (head < rp.n_heads + rp.n_kv_heads) rope_c = rp.cos[pos * half + i], rope_s = rp.sin[pos * half + i];
        if (head >= rp.n_heads) {
          const int64_t kvh = head - rp.n_heads - (head < rp.n_heads + rp.n_kv_heads ? 0 : rp.n_kv_heads);
          rope_off = rope_cache_offset(rp, rp.seqs[j], kvh, pos);
        }
      }
    }
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[r][j] = 0.f;
    for (int64_t c = 0; c < nchunks; ++c) {
      if (c > 0) load(c);
#pragma unroll
      for (int i = 0; i < kUnroll; ++i) {
        const int64_t v = c * chunk + int64_t(i) * 32 * SK + wk * 32 + lane;
        if (v < kv) {
          float af[R][V];
#pragma unroll
          for (int r = 0; r < R; ++r) Vec16<T>::unpack(av[i][r], af[r]);
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if (j < n) {
              uint4 braw;
              if constexpr (IN == GemvIn::kNorm) {
                braw = reinterpret_cast<const uint4*>(bs + j * k)[v];
              } else {
                braw = __ldg(reinterpret_cast<const uint4*>(in + j * k) + v);
              }
              float b[V];
              Vec16<T>::unpack(braw, b);
#pragma unroll
              for (int r = 0; r < R; ++r)
#pragma unroll
                for (int e = 0; e < V; ++e) acc[r][j] = fmaf(af[r][e], b[e], acc[r][j]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[r][j] = warp_sum(acc[r][j]);
    if constexpr (SK > 1) {
      if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int j = 0; j < NT; ++j) red[((g * SK) + wk) * R * NT + r * NT + j] = acc[r][j];
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          float t = 0.f;
#pragma unroll
          for (int s = 0; s < SK; ++s) t += red[((g * SK) + s) * R * NT + r * NT + j];
          acc[r][j] = t;
        }
      __syncthreads();  // red is rewritten by the next unit
    }
    if (wk != 0 || unit >= units) continue;

      // Epilogue: lanes take the (row, column) pairs in turn; indices stay compile-time.
#pragma unroll
    for (int p = 0; p < P; ++p) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int64_t row = unit * P + p;
        if (lane != (p * NT + j) % 32 || j >= n || row >= rows_out) continue;
        if constexpr (OUT == GemvOut::kStore || OUT == GemvOut::kArgmax) {
          const T yv = from_f<T>(acc[p][j]);
          static_cast<T*>(a.y)[j * a.m + row] = yv;
          if constexpr (OUT == GemvOut::kArgmax) {
            const float f = to_f<T>(yv);
            if (f > best_v[j] || (f == best_v[j] && row < best_i[j]) || (best_i[j] < 0 && f == f)) {
              best_v[j] = f, best_i[j] = row;
            }
          }
        } else if constexpr (OUT == GemvOut::kStoreF32) {
          static_cast<float*>(a.y)[j * a.m + row] = acc[p][j];
        } else if constexpr (OUT == GemvOut::kAddResidual) {
          a.residual[j * a.m + row] += to_f<T>(from_f<T>(acc[p][j]));
        } else if constexpr (OUT == GemvOut::kGated) {
          // The unfused path rounds gate and up to E, then the product.
          const float gate = to_f<T>(from_f<T>(acc[p][j]));
          const float up = to_f<T>(from_f<T>(acc[P + p][j]));
          static_cast<T*>(a.gated)[j * rows_out + row] = from_f<T>(::tunableop::cuda::gated_act(a.act, gate) * up);
        } else if constexpr (OUT == GemvOut::kRope) {
          // y rounded to E, then q and k rotated in fp32 (rope_rotate) and rounded again: the bits of kStore +
          // rope_store.
          const GemvRope& rp = a.rope;
          const int64_t head = row / half, i = row - head * half, r0 = head * rp.head_dim + i;
          const float x0 = to_f<T>(from_f<T>(acc[p][j])), x1 = to_f<T>(from_f<T>(acc[P + p][j]));
          float rot0 = x0, rot1 = x1;  // v heads: as they are
          if (head < rp.n_heads + rp.n_kv_heads) ::tunableop::cuda::rope_rotate(x0, x1, rope_c, rope_s, rot0, rot1);
          const T y0 = from_f<T>(rot0), y1 = from_f<T>(rot1);
          T* yr = static_cast<T*>(a.y) + j * a.m;
          yr[r0] = y0;
          yr[r0 + half] = y1;
          if (rope_off >= 0) {  // k or v, a slot that is stored
            T* dst = static_cast<T*>(head < rp.n_heads + rp.n_kv_heads ? rp.k_cache : rp.v_cache) + rope_off;
            dst[i] = y0;
            dst[i + half] = y1;
          }
        }
      }
    }
  }

  // The next projections' weights into the L2, this block's share of them: bulk prefetches of
  // 4 KiB on sm_90 (the copy engine fetches every byte), else one prefetch per 32-byte sector.
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int64_t bytes = a.prefetch_bytes[q] / 16 * 16;
    if (bytes <= 0) continue;
    const int64_t share = ((bytes + gridDim.x - 1) / gridDim.x + 127) / 128 * 128;
    const char* p = static_cast<const char*>(a.prefetch[q]);
    const int64_t end = min(bytes, share * (int64_t(blockIdx.x) + 1));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int64_t kPiece = 4096;
    for (int64_t off = share * blockIdx.x + int64_t(threadIdx.x) * kPiece; off < end;
         off += int64_t(kThreads) * kPiece) {
      const uint32_t size = uint32_t(min(kPiece, end - off));
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
    }
#else
    for (int64_t off = share * blockIdx.x + int64_t(threadIdx.x) * 32; off < end; off += int64_t(kThreads) * 32) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
    }
#endif
  }

  if constexpr (OUT == GemvOut::kArgmax) {
    // Block's best per column, then one atomicMax per block; the last block to finish turns the
    // keys into ids and leaves keys and counter zero for the next launch.
    __shared__ unsigned long long block_key[kWarps][NT];
    __shared__ bool last_block;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      unsigned long long key = best_i[j] >= 0 ? argmax_key(best_v[j], best_i[j]) : 0ull;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, o);
        key = other > key ? other : key;
      }
      if (lane == 0) block_key[warp][j] = key;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int j = 0; j < n; ++j) {
        unsigned long long key = 0;
        for (int w = 0; w < kWarps; ++w) key = block_key[w][j] > key ? block_key[w][j] : key;
        if (key) atomicMax(a.keys + j, key);
      }
      __threadfence();
      last_block = atomicAdd(a.counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last_block) {
      __threadfence();
      if (threadIdx.x < n) {
        const unsigned long long key = atomicExch(a.keys + threadIdx.x, 0ull);
        a.ids[threadIdx.x] = key ? int32_t(0xffffffffu - static_cast<uint32_t>(key)) : 0;
      }
      if (threadIdx.x == 0) atomicExch(a.counter, 0u);
    }
  }
}

// One instantiation's launch: a persistent grid of as many blocks as fit at once (capped by the
// work), its shared-memory limit raised once (outside capture: the first call is eager).
template <class T, int NT, int R, int SK, GemvIn IN, GemvOut OUT>
cudaError_t launch_one(const FusedGemvArgs& a, cudaStream_t stream) {
  auto kernel = fused_gemv_kernel<T, NT, R, SK, IN, OUT>;
  constexpr int G = kWarps / SK;
  constexpr int P = OUT == GemvOut::kGated || OUT == GemvOut::kRope ? R / 2 : R;
  const size_t smem = IN == GemvIn::kNorm ? size_t(a.n) * size_t(a.k) * sizeof(T) : 0;
  static size_t configured = 48 * 1024;  // per instantiation
  static size_t occupancy_smem = ~size_t(0);
  static int per_sm = 0, sms = 0;
  if constexpr (IN == GemvIn::kNorm) {
    if (smem > configured) {
      cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      if (e != cudaSuccess) return e;
      configured = smem;
    }
  }
  if (occupancy_smem != smem) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem);
    if (e != cudaSuccess) return e;
    if (per_sm < 1) return cudaErrorInvalidConfiguration;  // does not fit an SM
    occupancy_smem = smem;
  }
  const int64_t rows_out = OUT == GemvOut::kGated || OUT == GemvOut::kRope ? a.m / 2 : a.m;
  const int64_t units = (rows_out + P - 1) / P;
  const int64_t want = (units + G - 1) / G;
  const int64_t fit = int64_t(per_sm) * sms;
  const unsigned grid = unsigned(want < fit ? want : fit);
  return ::tunableop::cuda::launch(kernel, dim3(grid), dim3(kThreads), smem, stream, a.pdl, a);
}

template <class T, int R, int SK, GemvIn IN, GemvOut OUT>
cudaError_t launch_n(const FusedGemvArgs& a, cudaStream_t stream) {
  if (a.n <= 1) return launch_one<T, 1, R, SK, IN, OUT>(a, stream);
  if (a.n <= 2) return launch_one<T, 2, R, SK, IN, OUT>(a, stream);
  if (a.n <= 4) return launch_one<T, 4, R, SK, IN, OUT>(a, stream);
  return launch_one<T, 8, R, SK, IN, OUT>(a, stream);
}

// The shapes of fused_gemv_shapes(), as templates.
template <class T, GemvIn IN, GemvOut OUT>
cudaError_t launch_shape(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  const int key = s.rows * 16 + s.k_split;
  if constexpr (OUT == GemvOut::kGated || OUT == GemvOut::kRope) {
    switch (key) {
      case 2 * 16 + 1: return launch_n<T, 2, 1, IN, OUT>(a, stream);
      case 4 * 16 + 1: return launch_n<T, 4, 1, IN, OUT>(a, stream);
      case 2 * 16 + 2: return launch_n<T, 2, 2, IN, OUT>(a, stream);
      case 4 * 16 + 2: return launch_n<T, 4, 2, IN, OUT>(a, stream);
      case 2 * 16 + 4: return launch_n<T, 2, 4, IN, OUT>(a, stream);
      case 2 * 16 + 8: return launch_n<T, 2, 8, IN, OUT>(a, stream);
    }
  } else {
    switch (key) {
      case 1 * 16 + 1: return launch_n<T, 1, 1, IN, OUT>(a, stream);
      case 2 * 16 + 1: return launch_n<T, 2, 1, IN, OUT>(a, stream);
      case 4 * 16 + 1: return launch_n<T, 4, 1, IN, OUT>(a, stream);
      case 1 * 16 + 2: return launch_n<T, 1, 2, IN, OUT>(a, stream);
      case 2 * 16 + 2: return launch_n<T, 2, 2, IN, OUT>(a, stream);
      case 1 * 16 + 4: return launch_n<T, 1, 4, IN, OUT>(a, stream);
      case 1 * 16 + 8: return launch_n<T, 1, 8, IN, OUT>(a, stream);
    }
  }
  return cudaErrorInvalidValue;
}

template <GemvIn IN, GemvOut OUT>
cudaError_t launch_elem(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream) {
  if (a.e == Elem::kF32) return launch_shape<float, IN, OUT>(a, s, stream);
  return launch_shape<__nv_bfloat16, IN, OUT>(a, s, stream);
}

}  // namespace tunableop::cuda::fused
