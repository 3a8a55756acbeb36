// Workspace of the attention candidates when the caller passes none (AttentionOperands::
// workspace null or too small): per (thread, device, stream), grow-only, its own blocks (not the
// GEMM scratch, which an attention candidate's GEMMs may use at the same time), and like it an
// outgrown block is kept until the thread ends (RetainedBlocks, cuda_util.h): a captured CUDA
// graph (the engine's decode step) holds the pointer it was captured with, and freeing that
// block when a later, larger problem (a long prefill) grows the workspace would leave the graph
// writing freed memory.
#pragma once

#include <cstddef>

#include "tunableop/attention.h"
#include "tunableop/status.h"

namespace tunableop::cuda {

StatusOr<void*> attention_workspace(size_t bytes, void* stream);

// What a candidate needing `bytes` of workspace uses: the caller's (o.workspace) where it holds
// them and is 16-byte aligned, else attention_workspace on o.stream; null for 0 bytes.
StatusOr<void*> operand_workspace(const AttentionOperands& o, size_t bytes);

// `count` 32-bit counters, zero when handed out, per (thread, device, stream) and grow-only like
// the workspace (a captured graph keeps pointing at them): the split decode kernels (one-launch,
// cluster, streaming) draw tickets from them and leave them at zero when they end, so every
// launch and every graph replay finds them zeroed. Allocated (and zeroed on `stream`) on
// the first use with that count (stream-ordered), which must not be inside a stream capture.
StatusOr<unsigned*> decode_tickets(size_t count, void* stream);

// What a split decode candidate whose last block merges the splits needs: `bytes` of workspace
// (operand_workspace) and `counters` tickets (decode_tickets); both null when `bytes` is 0.
struct SplitScratch {
  void* workspace = nullptr;
  unsigned* tickets = nullptr;
};
StatusOr<SplitScratch> split_scratch(const AttentionOperands& o, size_t bytes, size_t counters);

}  // namespace tunableop::cuda
