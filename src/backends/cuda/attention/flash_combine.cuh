// Split-KV combine: out = sum_s w_s * O_s / sum_s w_s with w_s = 2^(lse_s - max lse), over the
// fp32 partial outputs and log2-sum-exps that flash_fwd_kernel wrote with gridDim.z > 1.
// Splits that saw no visible key carry lse = -inf and weigh nothing.
//
// One block per output row. The weights go to shared memory first; then groups of D/4 threads
// (a float4 each) take every kGroups-th split and the groups are summed through shared memory,
// so a row with many splits (decode against one kv head: few rows, 64-128 splits) is read by
// the whole block in parallel rather than one split after another.
//
// Launched with programmatic dependent launch on sm_90: the main kernel lets it start early and
// it waits (griddepcontrol.wait) until every partial is written and visible.
#pragma once

#include "backends/cuda/attention/flash_kernel.cuh"

namespace tunableop::cuda::flash_detail {

constexpr int kCombineThreads = 256;
constexpr int kMaxSplits = kCombineThreads;

// Block-wide max (kMax) or sum over kCombineThreads threads; every thread gets the result.
template <bool kMax>
__device__ __forceinline__ float combine_reduce(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kCombineThreads / 32; ++w) v = kMax ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

template <class T, int D>
__global__ void __launch_bounds__(kCombineThreads) flash_combine_kernel(FlashArgs a, int rows_total, int slabs) {
  constexpr int kLanes = D / 4;                      // threads per row vector (float4 each)
  constexpr int kGroups = kCombineThreads / kLanes;  // splits handled side by side
  __shared__ float weight[kMaxSplits];
  __shared__ float4 partial[kGroups][kLanes];
  __shared__ float scratch[kCombineThreads / 32];
  grid_dependency_wait();
  grid_dependents_launch();  // the next kernel waits for our writes in its turn

  const int tid = threadIdx.x;
  const int bk = int(blockIdx.x / unsigned(rows_total)), row = int(blockIdx.x % unsigned(rows_total));
  const float* o_part = static_cast<const float*>(a.workspace);
  const float* lse = o_part + int64_t(a.splits) * slabs * rows_total * D;
  auto at = [&](int s) { return (int64_t(s) * slabs + bk) * rows_total + row; };

  const float mine = tid < a.splits ? lse[at(tid)] : -INFINITY;
  const float mx = combine_reduce<true>(mine, scratch);
  const float m_use = mx == -INFINITY ? 0.f : mx;
  const float w = tid < a.splits ? exp2f(mine - m_use) : 0.f;  // exp2(-inf) = 0
  if (tid < kMaxSplits) weight[tid] = w;
  const float wsum = combine_reduce<false>(w, scratch);  // its barriers also publish `weight`

  const int group = tid / kLanes, lane = tid % kLanes;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = group; s < a.splits; s += kGroups) {
    const float ws = weight[s];
    if (ws == 0.f) continue;
    const float4 v = *reinterpret_cast<const float4*>(o_part + at(s) * D + 4 * lane);
    acc.x = fmaf(ws, v.x, acc.x), acc.y = fmaf(ws, v.y, acc.y);
    acc.z = fmaf(ws, v.z, acc.z), acc.w = fmaf(ws, v.w, acc.w);
  }
  partial[group][lane] = acc;
  __syncthreads();
  if (tid >= kLanes) return;
  float4 sum = partial[0][tid];
#pragma unroll
  for (int g = 1; g < kGroups; ++g) {
    const float4 v = partial[g][tid];
    sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int group_heads = a.heads / a.kv_heads;
  const int b = bk / a.kv_heads, g = bk % a.kv_heads;
  const int i = row / group_heads, h = g * group_heads + row % group_heads;
  T* dst = static_cast<T*>(a.out) + (int64_t(b) * a.q_len + i) * a.o_row_stride + int64_t(h) * D + 4 * tid;
  const uint32_t lo = pack2<T>(sum.x * inv, sum.y * inv), hi = pack2<T>(sum.z * inv, sum.w * inv);
  *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);  // 8-byte store: D, strides multiples of 8
}

}  // namespace tunableop::cuda::flash_detail
