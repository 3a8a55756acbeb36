// The cache-blocked GEMM driver (GotoBLAS / BLIS loop nest) over an ISA's micro-kernel.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/cpu_features.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::cpu_kernels {

// Block sizes in elements of op(A) rows (mc), op(B) columns (nc) and the shared k dimension
// (kc). mc and nc are rounded to the micro-kernel's mr / nr for each dtype, and shrink to the
// problem. threads <= 0 means every hardware thread.
struct BlockedConfig {
  Isa isa = Isa::kPortable;
  int64_t mc = 192;
  int64_t nc = 2048;
  int64_t kc = 384;
  int threads = 1;
};

// Any dtype, transpose, ld, batch. Returns invalid_argument for bad params or operands and
// internal when scratch memory cannot be had; never aborts.
Status blocked_gemm(const GemmParams& p, const GemmOperands& ops, const BlockedConfig& cfg);

}  // namespace tunableop::cpu_kernels
