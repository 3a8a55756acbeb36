// Owning handles for CUDA resources (device and pinned host memory, a stream, an instantiated
// graph), shared by the CUDA backend and the LLM engine's CUDA device. Move-only; each frees
// what it holds when it dies. Depends only on the CUDA runtime and core's Status.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "tunableop/status.h"

namespace tunableop::cuda {

namespace detail {
struct FreeDevice {
  void operator()(void* p) const { cudaFree(p); }
};
struct FreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct DestroyStream {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct DestroyGraphExec {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
}  // namespace detail

// One block of CUDA memory that grows (never shrinks) on request. Growing frees the old block
// first (cudaFree waits for the device, so work still queued on it is safe) and does not keep
// its contents. DeviceBuffer is device memory, PinnedBuffer page-locked host memory
// (asynchronous copies from and to it overlap with the host).
template <class Free>
class Block {
 public:
  // At least `bytes` bytes; an allocation failure is cleared (it is not sticky) and returned.
  Status ensure(size_t bytes);
  void reset() {
    p_.reset();
    bytes_ = 0;
  }
  // Gives the block up without freeing it (to another owner, or in destructors that run after
  // the CUDA runtime has shut down, where freeing is not safe).
  void* release() {
    bytes_ = 0;
    return p_.release();
  }
  void* get() const { return p_.get(); }
  size_t bytes() const { return p_ ? bytes_ : 0; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_.get());
  }

 private:
  std::unique_ptr<void, Free> p_;
  size_t bytes_ = 0;
};
using DeviceBuffer = Block<detail::FreeDevice>;
using PinnedBuffer = Block<detail::FreeHost>;

// dst grown to `bytes` and filled from host memory `src`, on `stream` (the stream whose kernels
// read dst), then synchronized. Not cudaMemcpy: it runs on the legacy stream, which does not order
// a non-blocking stream's next kernel after it, and from pageable memory it returns before the
// DMA lands (a conversion kernel then read the previous tensor's bytes: bf16 and fp8 engines
// loaded from a directory differed from engine to engine; measured on an H200, 2026-11-28).
Status upload(DeviceBuffer& dst, const void* src, size_t bytes, cudaStream_t stream);

// A non-blocking stream (never serialised against the legacy default stream).
class Stream {
 public:
  Status create();  // on the current device
  cudaStream_t get() const { return s_.get(); }

 private:
  std::unique_ptr<CUstream_st, detail::DestroyStream> s_;
};

// An instantiated CUDA graph.
class GraphExec {
 public:
  // Ends the capture running on `stream` and instantiates what it recorded. A capture error is
  // cleared (capture errors are not sticky) and returned.
  Status end_capture(cudaStream_t stream);
  Status launch(cudaStream_t stream) const;

 private:
  std::unique_ptr<CUgraphExec_st, detail::DestroyGraphExec> exec_;
};

}  // namespace tunableop::cuda
