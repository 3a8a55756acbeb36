// The span of a column-major operand (ld gaps and batch strides included) and the check that it
// and its byte count fit a 64-bit size: shared by the GEMM-shaped ops (GEMM, ScaledGemm).
#pragma once

#include <cstdint>

#include "tunableop/checked_size.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop::ops {

// Elements an operand spans over the batch; not ok() when that overflows.
CheckedInt checked_span(int64_t batch, int64_t stride, int64_t ld, int64_t rows, int64_t cols);
// The same, saturated (only validated params are guaranteed to fit).
inline int64_t operand_span(int64_t batch, int64_t stride, int64_t ld, int64_t rows, int64_t cols) {
  return checked_span(batch, stride, ld, rows, cols).value();
}
// invalid_argument naming the operand when its span or byte count does not fit: a wrapped
// value would size buffers smaller than the kernels index.
Status check_operand_size(const char* name, DType dtype, int64_t batch, int64_t stride, int64_t ld, int64_t rows,
                          int64_t cols);

}  // namespace tunableop::ops
