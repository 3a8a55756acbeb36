// The fp8 engine's quantizing kernels (fp8_kernels.h). One block per row in three steps: the
// row's values (recomputed per pass from the inputs, which stay in L1/L2: a row of 16384 floats
// does not fit shared memory), their largest magnitude, then q = value / scale, e4m3 saturated.
// Math in fp32; each value rounded to E before it is quantized, as the bf16 engine stores it.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "cuda_common/elem.cuh"
#include "cuda_common/gated_act.cuh"
#include "cuda_common/pdl.cuh"
#include "llm/cuda/fp8_kernels.h"
#include "llm/cuda/kernel_common.cuh"
#include "llm/fp8_scale.h"

namespace tunableop::llm::cuda {

namespace {

using ::tunableop::cuda::from_f;
using ::tunableop::cuda::launch;
using ::tunableop::cuda::to_f;

// Quantizes one row (this block's): value(i) for i < width into q[i], its scale into *scale.
template <class F>
__device__ void quantize_row(const F& value, int64_t width, uint8_t* q, float* scale, float* scratch) {
  float amax = 0.0f;
  int finite = 1;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = value(i);
    finite &= isfinite(v) ? 1 : 0;
    amax = fmaxf(amax, fabsf(v));
  }
  finite = __syncthreads_and(finite);
  amax = block_reduce<true>(amax, scratch);
  const float s = fp8_row_scale(amax, finite != 0);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    q[i] = uint8_t(__nv_cvt_float_to_fp8(value(i) / s, __NV_SATFINITE, __NV_E4M3));
  }
  if (threadIdx.x == 0) *scale = s;
}

template <class T>
__global__ void quantize_rows_kernel(const T* x, int64_t width, uint8_t* q, float* scales) {
  pdl_enter();
  __shared__ float scratch[32];
  const T* row = x + blockIdx.x * width;
  quantize_row([row](int64_t i) { return to_f(row[i]); }, width, q + blockIdx.x * width, scales + blockIdx.x, scratch);
}

template <class E>
__global__ void rmsnorm_fp8_kernel(const float* x, const E* w, int64_t width, float eps, bool add_one, uint8_t* q,
                                   float* scales) {
  pdl_enter();
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * width;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_reduce<false>(ss, scratch);
  const float inv = rsqrtf(ss / float(width) + eps);
  auto value = [=](int64_t i) {
    const float wi = to_f(w[i]);
    return to_f(from_f<E>(xr[i] * inv * (add_one ? 1.0f + wi : wi)));
  };
  quantize_row(value, width, q + blockIdx.x * width, scales + blockIdx.x, scratch);
}

template <class E>
__global__ void gated_fp8_kernel(const E* gate_up, int64_t inter, Act act, uint8_t* q, float* scales) {
  pdl_enter();
  __shared__ float scratch[32];
  const E* row = gate_up + blockIdx.x * 2 * inter;
  auto value = [=](int64_t i) {
    return to_f(from_f<E>(::tunableop::cuda::gated_act(act, to_f(row[i])) * to_f(row[inter + i])));
  };
  quantize_row(value, inter, q + blockIdx.x * inter, scales + blockIdx.x, scratch);
}

// A thread per 4 elements of the row, 32 to 1024 threads.
dim3 row_threads(int64_t width) {
  return dim3(unsigned(std::min<int64_t>(1024, std::max<int64_t>(32, (width / 4 + 31) / 32 * 32))));
}

bool bad_shape(int64_t rows, int64_t width) { return rows < 0 || width < 1 || rows > int64_t(0x7fffffff); }

}  // namespace

cudaError_t quantize_rows_fp8(Elem e, bool f32, const void* x, int64_t rows, int64_t width, uint8_t* q, float* scales,
                              cudaStream_t s, bool pdl) {
  if (bad_shape(rows, width)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (f32)
    return launch(quantize_rows_kernel<float>, dim3(unsigned(rows)), row_threads(width), 0, s, pdl,
                  static_cast<const float*>(x), width, q, scales);
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(quantize_rows_kernel<E>, dim3(unsigned(rows)), row_threads(width), 0, s, pdl,
                  static_cast<const E*>(x), width, q, scales);
  });
}

cudaError_t rmsnorm_fp8(Elem e, const float* x, const void* w, int64_t rows, int64_t width, float eps, bool add_one,
                        uint8_t* q, float* scales, cudaStream_t s, bool pdl) {
  if (bad_shape(rows, width)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(rmsnorm_fp8_kernel<E>, dim3(unsigned(rows)), row_threads(width), 0, s, pdl, x,
                  static_cast<const E*>(w), width, eps, add_one, q, scales);
  });
}

cudaError_t gated_activation_fp8(Elem e, const void* gate_up, int64_t rows, int64_t inter, Act act, uint8_t* q,
                                 float* scales, cudaStream_t s, bool pdl) {
  if (bad_shape(rows, inter)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(gated_fp8_kernel<E>, dim3(unsigned(rows)), row_threads(inter), 0, s, pdl,
                  static_cast<const E*>(gate_up), inter, act, q, scales);
  });
}

}  // namespace tunableop::llm::cuda
