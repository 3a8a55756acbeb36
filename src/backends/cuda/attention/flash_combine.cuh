// Split-KV combine: out = sum_s w_s * O_s / sum_s w_s with w_s = 2^(lse_s - max lse), over the
// fp32 partial outputs and log2-sum-exps that flash_fwd_kernel wrote with gridDim.z > 1.
// Splits that saw no visible key carry lse = -inf and weigh nothing.
#pragma once

#include "backends/cuda/attention/flash_kernel.cuh"

namespace tunableop::cuda::flash_detail {

constexpr int kCombineWarps = 4;

template <class T, int D>
__global__ void __launch_bounds__(32 * kCombineWarps) flash_combine_kernel(FlashArgs a, int rows_total, int slabs) {
  const int lane = threadIdx.x & 31;
  const int64_t item = int64_t(blockIdx.x) * kCombineWarps + (threadIdx.x >> 5);  // one warp per row
  if (item >= int64_t(slabs) * rows_total) return;
  const int bk = int(item / rows_total), row = int(item % rows_total);
  const float* o_part = static_cast<const float*>(a.workspace);
  const float* lse = o_part + int64_t(a.splits) * slabs * rows_total * D;
  auto at = [&](int s) { return (int64_t(s) * slabs + bk) * rows_total + row; };

  float mx = -INFINITY;
  for (int s = lane; s < a.splits; s += 32) mx = fmaxf(mx, lse[at(s)]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const float m_use = mx == -INFINITY ? 0.f : mx;

  float acc[D / 32];
#pragma unroll
  for (int e = 0; e < D / 32; ++e) acc[e] = 0.f;
  float wsum = 0.f;
  for (int s = 0; s < a.splits; ++s) {
    const float w = exp2f(lse[at(s)] - m_use);
    if (w == 0.f) continue;  // uniform across the warp
    wsum += w;
    const float* src = o_part + at(s) * D;
#pragma unroll
    for (int e = 0; e < D / 32; ++e) acc[e] = fmaf(w, src[lane + 32 * e], acc[e]);
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  const int group = a.heads / a.kv_heads;
  const int b = bk / a.kv_heads, g = bk % a.kv_heads;
  const int i = row / group, h = g * group + row % group;
  T* dst = static_cast<T*>(a.out) + (int64_t(b) * a.q_len + i) * a.o_row_stride + int64_t(h) * D;
#pragma unroll
  for (int e = 0; e < D / 32; ++e) dst[lane + 32 * e] = from_float<T>(acc[e] * inv);
}

}  // namespace tunableop::cuda::flash_detail
