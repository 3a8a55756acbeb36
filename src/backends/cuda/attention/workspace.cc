#include "backends/cuda/attention/workspace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backends/cuda/common/cuda_util.h"
#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"

namespace tunableop::cuda {

StatusOr<void*> attention_workspace(size_t bytes, void* stream) {
  thread_local RetainedBlocks cache;  // not the GEMM scratch: both may be in use at once
  if (bytes == 0) return static_cast<void*>(nullptr);
  return cache.get(bytes, stream);
}

StatusOr<void*> operand_workspace(const AttentionOperands& o, size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  if (o.workspace && o.workspace_bytes >= bytes && reinterpret_cast<uintptr_t>(o.workspace) % 16 == 0)
    return o.workspace;
  return attention_workspace(bytes, o.stream);
}

StatusOr<unsigned*> decode_tickets(size_t count, void* stream) {
  thread_local RetainedBlocks cache;
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(unsigned);
  auto list = cache.blocks(stream);
  if (!list.is_ok()) return list.status();
  std::vector<DeviceBuffer>& blocks = **list;
  if (!blocks.empty() && blocks.back().bytes() >= bytes) return static_cast<unsigned*>(blocks.back().get());
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    return Status::unsupported("decode attention: ticket counters must be allocated before stream capture");
  DeviceBuffer b;
  TUNABLEOP_RETURN_IF_ERROR(b.ensure(std::max(bytes, size_t(4096))));
  // Stream-ordered, so the first kernel on a non-blocking stream finds them zeroed.
  TUNABLEOP_CUDA_TRY(cudaMemsetAsync(b.get(), 0, b.bytes(), static_cast<cudaStream_t>(stream)));
  blocks.push_back(std::move(b));
  return static_cast<unsigned*>(blocks.back().get());
}

StatusOr<SplitScratch> split_scratch(const AttentionOperands& o, size_t bytes, size_t counters) {
  SplitScratch s;
  if (bytes == 0) return s;
  auto ws = operand_workspace(o, bytes);
  if (!ws.is_ok()) return ws.status();
  auto t = decode_tickets(counters, o.stream);
  if (!t.is_ok()) return t.status();
  s.workspace = *ws, s.tickets = *t;
  return s;
}

}  // namespace tunableop::cuda
