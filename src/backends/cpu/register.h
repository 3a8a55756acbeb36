// Entry point of the CPU backend library (libtunableop_backend_cpu): our own kernels (GEMM,
// GemmAndBias, attention, the host-thread all-reduce), then each BLAS provider the build found.
// Called by the registry glue (src/backends/register_all.cc); libtunableop.so finds it by the C
// name below when it opens the library at run time.
#pragma once

#include "tunableop/registry.h"

namespace tunableop {

void register_backend_cpu(Registry& r);

}  // namespace tunableop

extern "C" void tunableop_register_backend_cpu(void* registry);  // registry: a tunableop::Registry*
