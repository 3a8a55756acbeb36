// The engine's cuBLAS / cuBLASLt entry points (built with CUDA only).
#pragma once

#include "interpose/abi.h"

namespace tunableop::interpose {

Outcome serve_cublas_call(const CublasCall& call);
Outcome serve_lt_call(const LtCall& call);
// The engine's own libcublas / libcublasLt definition of `name` (the objects it was linked to).
void* engine_own_symbol(Library lib, const char* name);

}  // namespace tunableop::interpose
