// Planted: ops including the registry glue (a layer above it).
#include "backends/register_all.h"
#include "tunableop/gemm.h"
