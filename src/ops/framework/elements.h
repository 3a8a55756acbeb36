// Element access in fp64 for every dtype, and the relative error of an output layout: the
// shared vocabulary of references, numerics checks and tests.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/framework/definition.h"
#include "tunableop/op_tools.h"
#include "tunableop/types.h"

namespace tunableop {

// load_as_double and store_from_double are declared in tunableop/op_tools.h.

namespace ops {

// Relative Frobenius error of `out` (host memory, out.dtype) against `ref` laid out like it;
// only the m x n matrices count; NaN/Inf give +inf. With `scale` (laid out like ref), relative
// to max(||ref||, ||scale||): for results that may cancel far below the size of their terms.
double layout_error(const OutputLayout& out, const void* data, const std::vector<double>& ref,
                    const std::vector<double>* scale = nullptr);
// The layout's elements as doubles (c_span-sized vector, gaps 0).
std::vector<double> layout_to_double(const OutputLayout& out, const void* data);

}  // namespace ops
}  // namespace tunableop
