// Device helpers of the FP8 kernels: fp8 -> fp32 (the hardware's conversion on sm_89 and up),
// the output and bias in their runtime dtype, and the epilogue every kernel shares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/scaled_gemm/fp8_kernels.h"

namespace tunableop::cuda::fp8_detail {

__device__ __forceinline__ float fp8_to_f(uint8_t v, bool e5m2) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(v), e5m2 ? __NV_E5M2 : __NV_E4M3);
  return __half2float(__half(h));
}

// 16 e4m3 values (one 16-byte vector) as fp32, in a fixed order (A and B use the same one, so a
// dot product over them is the dot product of the vectors).
__device__ __forceinline__ void e4m3x16_to_f(const uint4& v, float (&f)[16]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[q] >> (16 * h)), __NV_E4M3);
      const float2 x = __half22float2(__half2(r));
      f[4 * q + 2 * h] = x.x;
      f[4 * q + 2 * h + 1] = x.y;
    }
  }
}

__device__ __forceinline__ float load_typed(const void* p, int64_t i, int type) {
  switch (type) {
    case 0: return static_cast<const float*>(p)[i];
    case 2: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return __half2float(static_cast<const __half*>(p)[i]);
  }
}

__device__ __forceinline__ void store_typed(void* p, int64_t i, int type, float v) {
  switch (type) {
    case 0: static_cast<float*>(p)[i] = v; break;
    case 2: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
  }
}

// C[row, col] = scale_a(row) * scale_b(col) * sum + bias[row], rounded once.
__device__ __forceinline__ void store_output(const Fp8Launch& a, int64_t row, int64_t col, float sum) {
  const float s = a.scale_a[a.rowwise ? row : 0] * a.scale_b[a.rowwise ? col : 0];
  float v = s * sum;
  if (a.bias) v += load_typed(a.bias, row, a.bias_type);
  store_typed(a.c, row + col * a.ldc, a.out_type, v);
}

}  // namespace tunableop::cuda::fp8_detail
