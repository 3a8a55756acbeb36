// Workspace of the attention candidates when the caller passes none (AttentionOperands::
// workspace null or too small): per (thread, device, stream), grow-only, and unlike the GEMM
// scratch buffer (cuda_util.h) an outgrown block is kept until the thread ends instead of being
// freed. A captured CUDA graph (the engine's decode step) holds the pointer it was captured
// with; freeing that block when a later, larger problem (a long prefill) grows the workspace
// would leave the graph writing freed memory.
#pragma once

#include <cstddef>

#include "tunableop/status.h"

namespace tunableop::cuda {

StatusOr<void*> attention_workspace(size_t bytes, void* stream);

}  // namespace tunableop::cuda
