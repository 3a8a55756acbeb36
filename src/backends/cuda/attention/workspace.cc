#include "backends/cuda/attention/workspace.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "cuda_common/cuda_check.h"
#include "cuda_common/cuda_memory.h"

namespace tunableop::cuda {

namespace {
struct Retained {
  std::map<std::pair<int, void*>, std::vector<DeviceBuffer>> by_stream;  // the last one is current
  ~Retained() {  // as cuda_util.cc's scratch: free on each block's device, unless the runtime is gone
    int saved = -1;
    const bool alive = cudaGetDevice(&saved) == cudaSuccess;
    for (auto& [key, blocks] : by_stream) {
      const bool here = alive && cudaSetDevice(key.first) == cudaSuccess;
      for (auto& b : blocks) here ? b.reset() : (void)b.release();
    }
    if (alive) cudaSetDevice(saved);
  }
};
}  // namespace

StatusOr<void*> attention_workspace(size_t bytes, void* stream) {
  thread_local Retained cache;
  if (bytes == 0) return static_cast<void*>(nullptr);
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  std::vector<DeviceBuffer>& blocks = cache.by_stream[{dev, stream}];
  if (!blocks.empty() && blocks.back().bytes() >= bytes) return blocks.back().get();
  DeviceBuffer b;
  // Doubling keeps what outgrown blocks hold to less than the current one.
  const size_t want = blocks.empty() ? bytes : std::max(bytes, 2 * blocks.back().bytes());
  TUNABLEOP_RETURN_IF_ERROR(b.ensure(want));
  blocks.push_back(std::move(b));
  return blocks.back().get();
}

StatusOr<unsigned*> decode_tickets(size_t count, void* stream) {
  thread_local Retained cache;
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(unsigned);
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  std::vector<DeviceBuffer>& blocks = cache.by_stream[{dev, stream}];
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

}  // namespace tunableop::cuda
