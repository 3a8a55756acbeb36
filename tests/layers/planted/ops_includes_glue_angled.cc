// Planted: ops including the registry glue (a layer above it), in angle brackets.
#include <backends/register_all.h>
#include <vector>
