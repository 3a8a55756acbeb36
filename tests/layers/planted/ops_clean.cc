// Allowed everywhere in ops: public headers, ops headers, the same folder.
#include <vector>
#include "definition.h"
#include "ops/gemm/reference.h"
#include "tunableop/context.h"
