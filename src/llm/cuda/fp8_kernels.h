// The fp8 engine's quantizing kernels (--dtype fp8; docs/llm.md, "FP8"): each writes a row-major
// [rows, width] e4m3 matrix q and one fp32 scale per row, by the rule of llm/fp8_scale.h, from
// the value the bf16 engine computes there (rounded to E first, so that the fp8 engine quantizes
// exactly what the bf16 one would multiply). One block per row, `pdl` as in kernels.h. Plain
// C++17 like kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

// q = e4m3 rows of x (E, or fp32 when `f32`): weights at load (a row per output channel) and
// activations that come from no norm or activation kernel (attention's output, o's input).
cudaError_t quantize_rows_fp8(Elem e, bool f32, const void* x, int64_t rows, int64_t width, uint8_t* q, float* scales,
                              cudaStream_t s, bool pdl = false);
// The norm -> e4m3 of a projection's input: q = e4m3 rows of E(rmsnorm(x) * w) (or * (1 + w)),
// rmsnorm as kernels.h's.
cudaError_t rmsnorm_fp8(Elem e, const float* x, const void* w, int64_t rows, int64_t width, float eps, bool add_one,
                        uint8_t* q, float* scales, cudaStream_t s, bool pdl = false);
// The gated activation -> e4m3 of down's input: q = e4m3 rows of E(act(gate) * up) over the
// gate_up rows [gate (inter) | up (inter)], as gated_activation.
cudaError_t gated_activation_fp8(Elem e, const void* gate_up, int64_t rows, int64_t inter, Act act, uint8_t* q,
                                 float* scales, cudaStream_t s, bool pdl = false);

}  // namespace tunableop::llm::cuda
