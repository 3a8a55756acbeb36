// The families' extra kernels (family_kernels.h). Element-wise or one reduction per row/head:
// memory-bound and small next to the projections around them. Reductions through CUB.
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "cuda_common/elem.cuh"
#include "cuda_common/pdl.cuh"
#include "llm/cuda/family_kernels.h"
#include "llm/cuda/kernel_common.cuh"

namespace tunableop::llm::cuda {

namespace {

using ::tunableop::cuda::from_f;
using ::tunableop::cuda::launch;
using ::tunableop::cuda::to_f;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

template <class E>
__global__ void add_bias_kernel(E* y, const E* bias, int64_t rows, int64_t width) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * width;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f<E>(to_f(y[i]) + to_f(bias[i % width]));
}

// Block (row, head): one warp over the head's head_dim elements.
template <class E>
__global__ void qk_norm_kernel(E* qkv, int64_t row_stride, int64_t n_heads, int64_t head_dim, const E* wq, const E* wk,
                               float eps) {
  pdl_enter();
  using WarpReduce = cub::WarpReduce<float>;
  __shared__ typename WarpReduce::TempStorage tmp;
  const int64_t h = blockIdx.y;
  E* head = qkv + blockIdx.x * row_stride + h * head_dim;
  const E* w = h < n_heads ? wq : wk;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < head_dim; i += 32) ss += to_f(head[i]) * to_f(head[i]);
  ss = __shfl_sync(0xffffffffu, WarpReduce(tmp).Sum(ss), 0);
  const float inv = rsqrtf(ss / float(head_dim) + eps);
  for (int64_t i = threadIdx.x; i < head_dim; i += 32) head[i] = from_f<E>(to_f(w[i]) * (to_f(head[i]) * inv));
}

template <class E>
__global__ void add_normed_residual_kernel(float* x, const E* y, const E* w, int64_t width, float eps, bool add_one) {
  pdl_enter();
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ float inv_s;
  const E* yr = y + blockIdx.x * width;
  float* xr = x + blockIdx.x * width;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) ss += to_f(yr[i]) * to_f(yr[i]);
  ss = BlockReduce(tmp).Sum(ss);
  if (threadIdx.x == 0) inv_s = rsqrtf(ss / float(width) + eps);
  __syncthreads();
  const float inv = inv_s;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) {
    const float wi = to_f(w[i]);
    xr[i] += to_f(from_f<E>(to_f(yr[i]) * inv * (add_one ? 1.0f + wi : wi)));
  }
}

template <class E>
__global__ void softcap_kernel(E* x, int64_t n, float cap) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = from_f<E>(cap * tanhf(to_f(x[i]) / cap));
}

}  // namespace

cudaError_t add_bias(Elem e, void* y, const void* bias, int64_t rows, int64_t width, cudaStream_t s, bool pdl) {
  if (rows * width == 0) return cudaSuccess;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(add_bias_kernel<E>, dim3(blocks_for(rows * width)), dim3(kThreads), 0, s, pdl, static_cast<E*>(y),
                  static_cast<const E*>(bias), rows, width);
  });
}

cudaError_t qk_norm(Elem e, void* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t n_kv_heads,
                    int64_t head_dim, const void* wq, const void* wk, float eps, cudaStream_t s, bool pdl) {
  if (rows == 0) return cudaSuccess;
  if (rows > 2147483647 || n_heads + n_kv_heads > 65535) return cudaErrorInvalidValue;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(qk_norm_kernel<E>, dim3(unsigned(rows), unsigned(n_heads + n_kv_heads)), dim3(32), 0, s, pdl,
                  static_cast<E*>(qkv), row_stride, n_heads, head_dim, static_cast<const E*>(wq),
                  static_cast<const E*>(wk), eps);
  });
}

cudaError_t add_normed_residual(Elem e, float* x, const void* y, const void* w, int64_t rows, int64_t width, float eps,
                                bool add_one, cudaStream_t s, bool pdl) {
  if (rows == 0) return cudaSuccess;
  if (rows > 2147483647) return cudaErrorInvalidValue;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(add_normed_residual_kernel<E>, dim3(unsigned(rows)), dim3(kThreads), 0, s, pdl, x,
                  static_cast<const E*>(y), static_cast<const E*>(w), width, eps, add_one);
  });
}

cudaError_t softcap(Elem e, void* x, int64_t n, float cap, cudaStream_t s, bool pdl) {
  if (n == 0) return cudaSuccess;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(softcap_kernel<E>, dim3(blocks_for(n)), dim3(kThreads), 0, s, pdl, static_cast<E*>(x), n, cap);
  });
}

}  // namespace tunableop::llm::cuda
