// The all-reduce's reference on the host: the sum of every rank's input in fp64, and how far a
// candidate's output may stray from it.
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/all_reduce.h"

namespace tunableop::ops {

// inputs[r]: rank r's input (host memory, p.dtype, p.count elements).
std::vector<double> all_reduce_reference(const AllReduceParams& p, const std::vector<const void*>& inputs);

// v rounded to `t` (fp32, bf16, fp16; fp64 unchanged), as a kernel rounds an fp32 sum.
double round_as(DType t, double v);

// Relative Frobenius error a correct candidate stays under: the output is rounded to the dtype
// once (the sums accumulate in fp32), so it grows with the dtype's epsilon and the rank count.
double all_reduce_tolerance(const AllReduceParams& p);

// Relative Frobenius error of `output` (host, p.output_dtype()) against `ref`; +inf for NaN/Inf.
double all_reduce_error(const AllReduceParams& p, const void* output, const std::vector<double>& ref);

}  // namespace tunableop::ops
