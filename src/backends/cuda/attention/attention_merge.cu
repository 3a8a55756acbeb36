// See attention_merge.h. Memory-bound: each thread merges 8 elements of one (row, head) with
// 16-byte loads and stores; the (row, head) pair's two log-sum-exps are read by its d/8 threads.
#include <cmath>

#include "backends/cuda/attention/attention_merge.h"
#include "cuda_common/elem.cuh"

namespace tunableop::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads) merge_kernel(AttentionMergeArgs a, int64_t vectors) {
  const int64_t gid = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (gid >= vectors) return;
  const int64_t per_pair = a.head_dim / 8;
  const int64_t pair = gid / per_pair, lane = gid % per_pair;
  const int64_t row = pair / a.heads, head = pair % a.heads;
  const float la = a.lse_out[head * a.rows + row], lb = a.lse_part[head * a.rows + row];
  const float m = fmaxf(la, lb);
  // Both parts see at least one key on every row the split makes, so m is finite unless the
  // inputs hold NaN or infinities, which then reach the output as NaN like the unsplit kernel's.
  float wa = expf(la - m), wb = expf(lb - m);
  const float inv = 1.f / (wa + wb);
  wa *= inv, wb *= inv;
  T* out = static_cast<T*>(a.out) + row * a.out_row_stride + head * a.head_dim + lane * 8;
  const T* part = static_cast<const T*>(a.part) + row * a.part_row_stride + head * a.head_dim + lane * 8;
  uint4 va = *reinterpret_cast<const uint4*>(out);
  const uint4 vb = *reinterpret_cast<const uint4*>(part);
  T* ea = reinterpret_cast<T*>(&va);
  const T* eb = reinterpret_cast<const T*>(&vb);
#pragma unroll
  for (int i = 0; i < 8; ++i) ea[i] = from_f<T>(wa * to_f<T>(ea[i]) + wb * to_f<T>(eb[i]));
  *reinterpret_cast<uint4*>(out) = va;
}

}  // namespace

cudaError_t attention_merge(const AttentionMergeArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return cudaSuccess;
  const int64_t vectors = a.rows * a.heads * (a.head_dim / 8);
  const dim3 grid(unsigned((vectors + kThreads - 1) / kThreads));
  if (a.bf16)
    merge_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(a, vectors);
  else
    merge_kernel<__half><<<grid, kThreads, 0, stream>>>(a, vectors);
  return cudaGetLastError();
}

}  // namespace tunableop::cuda
