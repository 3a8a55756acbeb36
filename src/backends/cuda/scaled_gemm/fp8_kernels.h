// Our own FP8 ScaledGemm kernels (host-side launch API; docs/backends-cuda.md, "ScaledGemm"):
//   simt: any layout and fp8 types, fp32 FMA over 64 x 64 tiles. Not fast: it is Default's
//         answer where cuBLASLt's FP8 kernels refuse a problem (a layout other than TN, an
//         m of 50257, e5m2 x e5m2), and the remainder rows of the split variants.
//   gemv: the decode kernel (n <= 16, TN, e4m3 x e4m3): every byte of A (the weight) read
//         once with 16-byte streaming loads, B (a few tokens) shared by R rows from L1,
//         fp32 accumulation, scales and bias in the epilogue. Weight-bandwidth bound.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

struct Fp8Launch {
  const void* a = nullptr;
  const void* b = nullptr;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  const void* bias = nullptr;  // null: none
  void* c = nullptr;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int transa = 0, transb = 0;  // 1: 'T'
  int a_e5m2 = 0, b_e5m2 = 0;  // 1: e5m2, 0: e4m3
  int rowwise = 0;             // scale_a has m values and scale_b n, else one each
  int out_type = 2;            // DType code (tunableop/types.h): 0 fp32, 2 bf16, 3 fp16
  int bias_type = 2;           // DType code of the bias
  int rows = 1, k_split = 1;   // gemv: rows per warp group (1, 2, 4), warps per row group (1, 2, 4)
};

inline constexpr int64_t kFp8GemvMaxN = 16;

cudaError_t fp8_simt_launch(const Fp8Launch& args, cudaStream_t stream);
// TN, e4m3 x e4m3, n <= 16, lda and ldb multiples of 16 and A, B 16-byte aligned (the caller
// checks).
cudaError_t fp8_gemv_launch(const Fp8Launch& args, cudaStream_t stream);

}  // namespace tunableop::cuda
