// Planted: the CLI including the op framework's internals instead of tunableop/op_tools.h.
#include "ops/framework/dispatch.h"
