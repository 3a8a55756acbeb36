#include "ops/gemm/operand_span.h"

#include <fmt/format.h>

#include <cctype>

namespace tunableop::ops {

CheckedInt checked_span(int64_t batch, int64_t stride, int64_t ld, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0 || batch == 0) return 0;
  return (CheckedInt(batch) - 1) * stride + CheckedInt(ld) * (cols - 1) + rows;
}

Status check_operand_size(const char* name, DType dtype, int64_t batch, int64_t stride, int64_t ld, int64_t rows,
                          int64_t cols) {
  CheckedInt n = checked_span(batch, stride, ld, rows, cols);
  if (n.ok() && checked_bytes(n.value(), dtype_size(dtype))) return Status::ok();
  return Status::invalid_argument(
      fmt::format("{} spans more bytes than a 64-bit size can hold ({} rows x {} columns as stored, ld{} {}, "
                  "batch {}, stride_{} {}, {}-byte elements): check the leading dimension, batch and stride",
                  name, rows, cols, char(std::tolower(name[0])), ld, batch, char(std::tolower(name[0])), stride,
                  dtype_size(dtype)));
}

}  // namespace tunableop::ops
