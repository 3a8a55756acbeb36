// Rotate-half RoPE of one rotation pair, shared by every CUDA kernel that rotates q and k (the
// LLM engine's rope_store kernels, the fused qkv GEMV's kRope epilogue) so that they give the
// same bits.
#pragma once

#include <cuda_runtime.h>

namespace tunableop::cuda {

// (x0, x1) = (x[i], x[i + head_dim / 2]) of a head, rotated by the angle whose cosine and sine
// are c and s: y0 = x0 c - x1 s, y1 = x1 c + x0 s, each product and sum rounded on its own.
// Written out with the _rn intrinsics because nvcc otherwise contracts these expressions into
// FMAs as each kernel's context suggests (rope_store's PTX kept x1 c exact in y1, the fused
// epilogue's x0 s: the same formula, one ulp apart in fp32). Unfused, it is also the CPU
// engine's arithmetic (a c - b s, b c + a s, compiled without FMA).
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

}  // namespace tunableop::cuda
