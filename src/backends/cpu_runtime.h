#pragma once

#include "tunableop/registry.h"

namespace tunableop {

// Host memory/timer runtime and the CPU validator; every build has it.
void register_cpu_runtime(Registry& r);

}  // namespace tunableop
