// Padded leading dimension: cuBLAS falls to a slow path when a leading dimension is not a
// multiple of its vector width (measured on H200: m = ldc = 50257 is 7x slower than 50304).
// These candidates compute into an aligned padded copy in the workspace and copy the m x n
// result out, so nothing outside C is written; the copies are part of the measured time.
#pragma once

#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cuda {

struct PadLdVariant {
  bool pad_inputs = false;  // also copy A/B into padded buffers when their ld is unaligned
  int granule = 64;         // elements the padded leading dimensions are a multiple of
};

// "Gemm_PadLd_C_g64" (C only) or "Gemm_PadLd_ABC_g64" (every unaligned operand).
std::string pad_ld_name(const PadLdVariant& v);
// Padded problems whose buffers exceed this are unsupported (tuning memory stays bounded).
inline constexpr size_t kPadLdMaxWorkspaceBytes = size_t(2) << 30;

std::vector<GemmCandidate> make_pad_ld_candidates();

}  // namespace tunableop::cuda
