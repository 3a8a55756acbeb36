// The math path's non-GEMM kernels: gathers into dense per-(sequence, kv head) matrices, the
// masked row softmax, and the scatter back into output rows. Plain loops: this path is the
// numerics reference, not the fast one.
#include <cfloat>

#include "backends/cuda/attention/math_kernels.h"
#include "cuda_common/elem.cuh"

namespace tunableop::cuda {

namespace {

__device__ __forceinline__ int64_t seq_len(const MathArgs& a, int64_t b) {
  return a.kv_lens ? int64_t(a.kv_lens[b]) : a.kv_len;
}
__device__ __forceinline__ int64_t seq_q_len(const MathArgs& a, int64_t b) {
  return a.q_lens ? int64_t(a.q_lens[b]) : a.q_len;
}

__device__ __forceinline__ int64_t kv_row(const MathArgs& a, int64_t b, int64_t g, int64_t j) {
  if (!a.page_size) return ((b * a.kv_heads + g) * a.max_seq + j) * a.head_dim;
  const int64_t page = a.block_table[b * a.pages_per_seq + j / a.page_size];
  return ((page * a.kv_heads + g) * a.page_size + j % a.page_size) * a.head_dim;
}

// One block per row of qg (grid.x = batch * kv_heads * M) and per key row of kg/vg (grid.y).
template <class T>
__global__ void gather_q_kernel(MathArgs a, T* qg) {
  const int64_t group = a.heads / a.kv_heads, M = a.q_len * group, D = a.head_dim;
  const int64_t row = blockIdx.x, bg = row / M, m = row % M;
  const int64_t b = bg / a.kv_heads, g = bg % a.kv_heads, i = m / group, h = g * group + m % group;
  const bool real = i < seq_q_len(a, b);
  const T* src = static_cast<const T*>(a.q) + (b * a.q_len + i) * a.q_row_stride + h * D;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) qg[row * D + e] = real ? src[e] : from_f<T>(0.f);
}

// First key visible to query i of sequence b (its window's start), given the visible end.
__device__ __forceinline__ int64_t first_visible(const MathArgs& a, int64_t visible) {
  return a.window > 0 && visible > a.window ? visible - a.window : 0;
}

template <class T>
__global__ void gather_kv_kernel(MathArgs a, int64_t bg0, T* kg, T* vg) {
  const int64_t D = a.head_dim, row = blockIdx.x, bg = bg0 + row / a.kv_len, j = row % a.kv_len;
  const int64_t b = bg / a.kv_heads, g = bg % a.kv_heads;
  const int64_t len = seq_len(a, b);
  // The first query (key position len - q_len') sees keys from its window's start.
  const bool real = j < len && j >= first_visible(a, len - seq_q_len(a, b) + 1);
  const int64_t off = real ? kv_row(a, b, g, j) : 0;
  const T* k = static_cast<const T*>(a.k) + off;
  const T* v = static_cast<const T*>(a.v) + off;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) {
    kg[row * D + e] = real ? k[e] : from_f<T>(0.f);
    vg[row * D + e] = real ? v[e] : from_f<T>(0.f);
  }
}

constexpr int kThreads = 256;

template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) v = kMax ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

// One block per score row of slabs [bg0, bg0 + gridDim.x / M).
template <class T>
__global__ void __launch_bounds__(kThreads) softmax_kernel(MathArgs a, int64_t bg0, const float* s, T* p) {
  __shared__ float scratch[kThreads / 32];
  const int64_t group = a.heads / a.kv_heads, M = a.q_len * group, L = a.kv_len;
  const int64_t row = blockIdx.x, bg = bg0 + row / M, i = (row % M) / group, b = bg / a.kv_heads;
  const int64_t len = seq_len(a, b), qlen = seq_q_len(a, b);
  const int64_t visible = i >= qlen ? 0 : a.causal ? len - qlen + i + 1 : len;
  const int64_t first = first_visible(a, visible);
  const float* sr = s + row * L;
  T* pr = p + row * L;
  const float cap = a.softcap;
  auto score = [&](int64_t j) { return cap > 0.f ? cap * tanhf(sr[j] / cap) : sr[j]; };
  float mx = -FLT_MAX;
  for (int64_t j = first + threadIdx.x; j < visible; j += kThreads) mx = fmaxf(mx, score(j));
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.f;
  for (int64_t j = first + threadIdx.x; j < visible; j += kThreads) sum += __expf(score(j) - mx);
  sum = block_reduce<false>(sum, scratch);
  const float inv = visible > first ? 1.f / sum : 0.f;
  for (int64_t j = threadIdx.x; j < L; j += kThreads)
    pr[j] = from_f<T>(j >= first && j < visible ? __expf(score(j) - mx) * inv : 0.f);
}

template <class T>
__global__ void scatter_kernel(MathArgs a, const float* og) {
  const int64_t group = a.heads / a.kv_heads, M = a.q_len * group, D = a.head_dim;
  const int64_t row = blockIdx.x, bg = row / M, m = row % M;
  const int64_t b = bg / a.kv_heads, g = bg % a.kv_heads, i = m / group, h = g * group + m % group;
  T* dst = static_cast<T*>(a.out) + (b * a.q_len + i) * a.o_row_stride + h * D;
  for (int64_t e = threadIdx.x; e < D; e += blockDim.x) dst[e] = from_f<T>(og[row * D + e]);
}

template <class F>
cudaError_t by_elem(MathElem e, F&& f) {
  switch (e) {
    case MathElem::kF32: return f(float{});
    case MathElem::kBF16: return f(__nv_bfloat16{});
    case MathElem::kF16: return f(__half{});
  }
  return cudaErrorInvalidValue;
}

unsigned threads_for(int64_t d) { return unsigned(d >= 128 ? 128 : 64); }

}  // namespace

cudaError_t math_gather_q(const MathArgs& a, void* qg, cudaStream_t s) {
  return by_elem(a.elem, [&](auto tag) {
    using T = decltype(tag);
    const int64_t slabs = a.batch * a.kv_heads, M = a.q_len * (a.heads / a.kv_heads);
    gather_q_kernel<T><<<unsigned(slabs * M), threads_for(a.head_dim), 0, s>>>(a, static_cast<T*>(qg));
    return cudaGetLastError();
  });
}

cudaError_t math_gather_kv(const MathArgs& a, int64_t bg0, int64_t slabs, void* kg, void* vg, cudaStream_t s) {
  return by_elem(a.elem, [&](auto tag) {
    using T = decltype(tag);
    gather_kv_kernel<T><<<unsigned(slabs * a.kv_len), threads_for(a.head_dim), 0, s>>>(a, bg0, static_cast<T*>(kg),
                                                                                       static_cast<T*>(vg));
    return cudaGetLastError();
  });
}

cudaError_t math_softmax(const MathArgs& a, int64_t bg0, int64_t slabs, const float* scores, void* p, cudaStream_t s) {
  return by_elem(a.elem, [&](auto tag) {
    using T = decltype(tag);
    const int64_t M = a.q_len * (a.heads / a.kv_heads);
    softmax_kernel<T><<<unsigned(slabs * M), kThreads, 0, s>>>(a, bg0, scores, static_cast<T*>(p));
    return cudaGetLastError();
  });
}

cudaError_t math_scatter(const MathArgs& a, const float* og, cudaStream_t s) {
  return by_elem(a.elem, [&](auto tag) {
    using T = decltype(tag);
    const int64_t M = a.q_len * (a.heads / a.kv_heads);
    scatter_kernel<T><<<unsigned(a.batch * a.kv_heads * M), threads_for(a.head_dim), 0, s>>>(a, og);
    return cudaGetLastError();
  });
}

}  // namespace tunableop::cuda
