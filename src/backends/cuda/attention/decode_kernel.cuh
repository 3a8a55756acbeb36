// One-launch decode attention for short caches (few query rows per kv head): the split-KV
// partials are combined by the last block of each (sequence, kv head) to finish, so there is
// no second kernel and no launch gap between the split and the combine.
//
// Grid: x = splits (blocks sharing one kv head's keys), y = batch * kv_heads; W warps per block
// (blockDim.x = 32 * W). Every block holds all R >= q_len * group query rows of its kv head
// (GQA/MQA: the group's query heads are the rows; they share each K/V row the block loads).
// The block's keys are split over its warps; a warp walks its keys one at a time with the
// head dim spread over its lanes (D / 32 elements each, one vector load per K and V row), a
// warp-wide dot product per row and an online softmax per row in registers. CUDA cores, not
// tensor cores: at a few rows per kv head the work is latency, not flops.
//
// Then, in a fixed order (bit-identical results run to run):
//   1. the block's warps are merged through shared memory (one warp after another);
//   2. one split: the block writes the output itself;
//      several: it writes its normalised fp32 partial and log2-sum-exp per row into the
//      workspace (flash_workspace_bytes' layout), fences, and takes a ticket from the slab's
//      counter; the block that draws the last ticket reads every split's partial (L2, ldcg)
//      and writes the output, then puts the counter back to 0. The counters (one per slab)
//      live in a zeroed per-(device, stream) buffer (decode_tickets, workspace.h), so a
//      captured graph finds them at 0 on every replay.
//
// Launched with programmatic dependent launch on sm_90: the block waits for the previous
// kernel (rope + cache write) before it reads anything and lets the next kernel (the output
// projection, which streams its weights before its own wait) launch at once.
#pragma once

#include "backends/cuda/attention/flash_kernel.cuh"

namespace tunableop::cuda::decode_detail {

using flash_detail::fast_exp2;
using flash_detail::from_float;
using flash_detail::grid_dependency_wait;
using flash_detail::grid_dependents_launch;
using flash_detail::pack2;

constexpr int kMaxWarps = 8;
constexpr int kMaxSplits = 32;
constexpr int kMaxRows = 32;    // rows per kv head, d64
constexpr int kRowDims = 2048;  // R * D: the query rows and accumulators of a lane fit in 2 x 64 registers

// D / 32 contiguous elements of a row per lane, as one load.
template <int D>
struct LaneVec;
template <>
struct LaneVec<64> {
  using type = uint32_t;
};
template <>
struct LaneVec<128> {
  using type = uint2;
};
template <>
struct LaneVec<256> {
  using type = uint4;
};

template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  }
}

// The E = D / 32 elements of one lane as floats.
template <class T, int E, class V>
__device__ __forceinline__ void to_floats(const V& v, float (&f)[E]) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 x = unpack2<T>(w[i]);
    f[2 * i] = x.x, f[2 * i + 1] = x.y;
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;  // the same bits in every lane (each butterfly step adds the same two values)
}

template <class T, int D, int R>
__global__ void __launch_bounds__(32 * kMaxWarps) decode_attention_kernel(FlashArgs a, unsigned* tickets) {
  static_assert(R * D <= kRowDims && R <= kMaxRows, "rows x head dim beyond the register budget");
  constexpr int E = D / 32;
  using Vec = typename LaneVec<D>::type;
  __shared__ __align__(16) float acc_s[R * D];  // the block's merged accumulators, then its output
  __shared__ float m_s[kMaxWarps][R], l_s[kMaxWarps][R];
  __shared__ float row_m[R], row_l[R];
  __shared__ float weight_s[kMaxSplits][R];
  __shared__ unsigned last_s;

  grid_dependency_wait();  // q and this step's K/V row come from the previous kernel
  grid_dependents_launch();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  const int splits = gridDim.x, split = blockIdx.x;
  const int bk = blockIdx.y, b = bk / a.kv_heads, g = bk % a.kv_heads;
  const int group = a.heads / a.kv_heads;
  const int rows_total = a.q_len * group;
  const int len = a.kv_lens ? a.kv_lens[b] : a.kv_len;
  const int q_real = a.q_lens ? a.q_lens[b] : a.q_len;
  const int rows_real = q_real * group;
  const int pos0 = len - q_real;  // causal: query i sits at key position pos0 + i

  // Keys of this block, then of this warp: [lo, len) shared out, lo the first query's window
  // start (keys before it are never read).
  const int lo = a.window > 0 ? max(0, pos0 - a.window + 1) : 0;
  const int per_split = (len - lo + splits - 1) / splits;
  const int j0 = min(len, lo + split * per_split), j1 = min(len, j0 + per_split);
  const int per_warp = (j1 - j0 + warps - 1) / warps;
  const int wj0 = min(j1, j0 + warp * per_warp), wj1 = min(j1, wj0 + per_warp);

  // Query rows in registers, pre-scaled into log2 units (softcapping: scaled only, the capped
  // score goes to log2 units); padding rows are zeros (and masked).
  const bool capped = a.softcap > 0.f;
  const float scale_log2 = a.scale * (capped ? 1.f : 1.4426950408889634f);
  float q[R][E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rows_real) {
      const int i = r / group, h = g * group + r % group;
      const T* src = static_cast<const T*>(a.q) + (int64_t(b) * a.q_len + i) * a.q_row_stride + int64_t(h) * D;
      to_floats<T, E>(*reinterpret_cast<const Vec*>(src + lane * E), q[r]);
#pragma unroll
      for (int e = 0; e < E; ++e) q[r][e] *= scale_log2;
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) q[r][e] = 0.f;
    }
  }

  const T* kbase = static_cast<const T*>(a.k);
  const T* vbase = static_cast<const T*>(a.v);
  auto row_offset = [&](int j) -> int64_t {
    if (!a.page_size) return (int64_t(bk) * a.max_seq + j) * D;
    const int page = a.block_table[int64_t(b) * a.pages_per_seq + j / a.page_size];
    return ((int64_t(page) * a.kv_heads + g) * a.page_size + j % a.page_size) * D;
  };

  float m[R], l[R], acc[R][E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] = 0.f;
  }

  // Several keys at a time (kKeysPerStep): their loads in flight together, their dot products reduced
  // side by side (independent shuffle chains), then per row one running-max update and one
  // rescale for the whole step. Branch-free over rows and keys (predicates), so the compiler
  // interleaves the rows' chains; keys past the warp's range load as zeros and are masked.
  // Registers: the scores are steps x rows, the K/V rows in flight steps x D / 16. One row of at
  // most 128 dims (Llama's MHA decode) takes 8 keys a step: twice the bytes in flight of 4, half
  // the dependent round trips per warp.
  constexpr int kKeysPerStep = R * D <= 128 ? 8 : R >= 32 ? 1 : R >= 16 ? 2 : 4;
  for (int jb = wj0; jb < wj1; jb += kKeysPerStep) {
    Vec kr[kKeysPerStep] = {}, vr[kKeysPerStep] = {};
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      if (jb + u < wj1) {
        const int64_t off = row_offset(jb + u) + lane * E;
        kr[u] = *reinterpret_cast<const Vec*>(kbase + off);
        vr[u] = *reinterpret_cast<const Vec*>(vbase + off);
      }
    }
    float s[kKeysPerStep][R];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      float kf[E];
      to_floats<T, E>(kr[u], kf);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) d = fmaf(q[r][e], kf[e], d);
        s[u][r] = d;
      }
    }
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) s[u][r] = warp_sum(s[u][r]);
    if (capped) {
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) s[u][r] = flash_detail::softcap_score(s[u][r], a.softcap) * 1.4426950408889634f;
    }
    float vf[kKeysPerStep][E];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) to_floats<T, E>(vr[u], vf[u]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      bool vis[kKeysPerStep];
      float mx = m[r];
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        const int j = jb + u;
        vis[u] = j < wj1 && r < rows_real && (!a.causal || j <= pos0 + r / group) &&
                 (a.window == 0 || j > pos0 + r / group - a.window);
        mx = vis[u] ? fmaxf(mx, s[u][r]) : mx;
      }
      const float m_use = mx == -INFINITY ? 0.f : mx;  // a row that saw no key yet stays at 0
      const float corr = fast_exp2(m[r] - m_use);      // 0 while m = -inf (l, acc still 0)
      float p[kKeysPerStep], psum = 0.f;
#pragma unroll
      for (int u = 0; u < kKeysPerStep; ++u) {
        p[u] = vis[u] ? fast_exp2(s[u][r] - m_use) : 0.f;
        psum += p[u];
      }
      m[r] = mx;
      l[r] = fmaf(l[r], corr, psum);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        float x = acc[r][e] * corr;
#pragma unroll
        for (int u = 0; u < kKeysPerStep; ++u) x = fmaf(p[u], vf[u][e], x);
        acc[r][e] = x;
      }
    }
  }

  // 1. Merge the warps: the block's max per row, then each warp's share added in warp order.
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) m_s[warp][r] = m[r], l_s[warp][r] = l[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float mx = -INFINITY;
    for (int w = 0; w < warps; ++w) mx = fmaxf(mx, m_s[w][r]);
    const float m_use = mx == -INFINITY ? 0.f : mx;
    const float f = fast_exp2(m[r] - m_use);  // 0 for a warp that saw no key of the row
#pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] *= f;
    if (tid == 0) {
      float sum = 0.f;
      for (int w = 0; w < warps; ++w) sum += l_s[w][r] * fast_exp2(m_s[w][r] - m_use);
      row_m[r] = mx, row_l[r] = sum;
    }
  }
  for (int w = 0; w < warps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int e = 0; e < E; ++e) {
          float* dst = &acc_s[r * D + lane * E + e];
          *dst = w == 0 ? acc[r][e] : *dst + acc[r][e];
        }
    }
    __syncthreads();
  }
  // Normalise in place; rows past rows_real (padding) have l = 0 and become zeros.
  for (int x = tid; x < rows_total * D; x += blockDim.x) {
    const float lr = row_l[x / D];
    acc_s[x] = lr > 0.f ? acc_s[x] / lr : 0.f;
  }
  __syncthreads();

  const int64_t out_row0 = int64_t(b) * a.q_len;
  auto store_out = [&](int r, int c, float v0, float v1) {  // elements c, c + 1 of row r
    const int i = r / group, h = g * group + r % group;
    T* dst = static_cast<T*>(a.out) + (out_row0 + i) * a.o_row_stride + int64_t(h) * D + c;
    *reinterpret_cast<uint32_t*>(dst) = pack2<T>(v0, v1);
  };
  if (splits == 1) {
    for (int x = 2 * tid; x < rows_total * D; x += 2 * blockDim.x) store_out(x / D, x % D, acc_s[x], acc_s[x + 1]);
    return;
  }

  // 2. Several splits: partial and log2-sum-exp out, a ticket, and the last block combines.
  const int slabs = gridDim.y;
  float* o_part = static_cast<float*>(a.workspace);
  float* lse = o_part + int64_t(splits) * slabs * rows_total * D;
  {
    float* mine = o_part + (int64_t(split) * slabs + bk) * rows_total * D;
    for (int x = tid * 4; x < rows_total * D; x += 4 * blockDim.x)
      *reinterpret_cast<float4*>(mine + x) = *reinterpret_cast<const float4*>(&acc_s[x]);
    if (tid < rows_total) {
      const float lr = row_l[tid];
      lse[(int64_t(split) * slabs + bk) * rows_total + tid] = lr > 0.f ? row_m[tid] + __log2f(lr) : -INFINITY;
    }
  }
  __threadfence();  // our partial is visible device-wide before the ticket says so
  __syncthreads();
  if (tid == 0) last_s = atomicAdd(&tickets[bk], 1u) == unsigned(splits - 1);
  __syncthreads();
  if (!last_s) return;
  __threadfence();  // the other blocks' partials, published before their tickets

  if (tid < rows_total) {
    const int r = tid;
    float mx = -INFINITY;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, __ldcg(lse + (int64_t(s) * slabs + bk) * rows_total + r));
    const float m_use = mx == -INFINITY ? 0.f : mx;
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float w = fast_exp2(__ldcg(lse + (int64_t(s) * slabs + bk) * rows_total + r) - m_use);
      weight_s[s][r] = w;
      sum += w;
    }
    row_l[r] = sum;
  }
  if (tid == 0) tickets[bk] = 0;  // for the next launch (or graph replay); nobody else reads it now
  __syncthreads();
  // Each thread takes 4 columns of a row and reads them from kCombineBatch splits at once (the
  // loads are independent; one after another they would cost an L2 round trip each).
  constexpr int kCombineBatch = 16;
  for (int x = 4 * tid; x < rows_total * D; x += 4 * blockDim.x) {
    const int r = x / D;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kCombineBatch) {
      float4 part[kCombineBatch];
#pragma unroll
      for (int u = 0; u < kCombineBatch; ++u) {
        if (s0 + u < splits)
          part[u] =
              __ldcg(reinterpret_cast<const float4*>(o_part + (int64_t(s0 + u) * slabs + bk) * rows_total * D + x));
      }
#pragma unroll
      for (int u = 0; u < kCombineBatch; ++u) {
        if (s0 + u >= splits) break;
        const float w = weight_s[s0 + u][r];  // every partial is finite (zeros where a split saw no key)
        sum.x = fmaf(w, part[u].x, sum.x), sum.y = fmaf(w, part[u].y, sum.y);
        sum.z = fmaf(w, part[u].z, sum.z), sum.w = fmaf(w, part[u].w, sum.w);
      }
    }
    const float inv = row_l[r] > 0.f ? 1.f / row_l[r] : 0.f;
    const int i = r / group, h = g * group + r % group;
    T* dst = static_cast<T*>(a.out) + (out_row0 + i) * a.o_row_stride + int64_t(h) * D + x % D;
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(sum.x * inv, sum.y * inv), pack2<T>(sum.z * inv, sum.w * inv));
  }
}

}  // namespace tunableop::cuda::decode_detail
