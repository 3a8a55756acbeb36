// The all-reduce's reference on the host: the sum of every rank's input in fp64, and how far a
// candidate's output may stray from it.
#pragma once

#include "tunableop/op_tools.h"

namespace tunableop::ops {

// Declared in the public tunableop/op_tools.h (tools check communicators with them too).
using tunableop::all_reduce_error;
using tunableop::all_reduce_reference;
using tunableop::all_reduce_tolerance;
using tunableop::round_as;

}  // namespace tunableop::ops
