// The skinny-GEMM driver: small n (decode-time GEMMs such as 4096 x 1 x 4096) as a few
// matrix-vector products that read A once, without packing it.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/cpu_features.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::cpu_kernels {

// Widest n the skinny candidates accept. Measured on a 2-core AVX-512 Xeon (m = k = 4096, fp32):
// with A transposed (the row-major nn.Linear case) skinny beats the blocked kernel up to n of
// about 32-64, with A as stored up to about 8-16; past that the register tiles win.
constexpr int64_t kSkinnyMaxN = 32;

struct SkinnyConfig {
  Isa isa = Isa::kPortable;
  int threads = 1;  // <= 0: every hardware thread
};

// Correct for any n (only efficient for small n): any dtype, transpose, ld and batch.
Status skinny_gemm(const GemmParams& p, const GemmOperands& ops, const SkinnyConfig& cfg);

}  // namespace tunableop::cpu_kernels
