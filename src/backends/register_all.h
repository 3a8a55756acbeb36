// The registry glue: the one place that knows every backend of this build. It sits above core
// (core never calls it) and gives the default Context its backends.
#pragma once

#include "tunableop/registry.h"

namespace tunableop {

// Every backend compiled into this build, in priority order.
void register_all_backends(Registry& r);

}  // namespace tunableop
