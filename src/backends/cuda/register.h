// Entry point of the CUDA backend library (libtunableop_backend_cuda), called by the registry
// glue (src/backends/register_all.cc) when the build has TUNABLEOP_HAVE_CUDA_BACKEND;
// libtunableop.so finds it by the C name below when it opens the library at run time. Harmless
// without a GPU: it then adds one note and nothing else.
#pragma once

#include "tunableop/registry.h"

namespace tunableop {

void register_cuda(Registry& r);

}  // namespace tunableop

extern "C" void tunableop_register_backend_cuda(void* registry);  // registry: a tunableop::Registry*
