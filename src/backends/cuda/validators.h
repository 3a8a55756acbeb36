// Validator lines that describe the CUDA environment: a results file tuned under another GPU,
// driver, CUDA runtime or cuBLAS(Lt) build is not trusted as-is.
#pragma once

#include "tunableop/registry.h"

namespace tunableop::cuda {

void add_cuda_validators(Registry& r);

}  // namespace tunableop::cuda
