// Entry point of the CUDA backend (called from src/backends/register_all.cc when the build has
// TUNABLEOP_HAVE_CUDA_BACKEND). Harmless without a GPU: it then adds one note and nothing else.
#pragma once

#include "tunableop/registry.h"

namespace tunableop {

void register_cuda(Registry& r);

}  // namespace tunableop
