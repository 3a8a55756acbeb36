#include "cuda_common/cuda_memory.h"

#include <string>
#include <type_traits>

#include "cuda_common/cuda_check.h"

namespace tunableop::cuda {

template <class Free>
Status Block<Free>::ensure(size_t bytes) {
  if (bytes <= this->bytes()) return Status::ok();
  reset();
  constexpr bool kDevice = std::is_same_v<Free, detail::FreeDevice>;
  void* p = nullptr;
  cudaError_t e = kDevice ? cudaMalloc(&p, bytes) : cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it for later calls
    const std::string what =
        std::string(kDevice ? "cudaMalloc(" : "cudaMallocHost(") + std::to_string(bytes) + " bytes)";
    return cuda_status(e, what.c_str());
  }
  p_.reset(p);
  bytes_ = bytes;
  return Status::ok();
}

template class Block<detail::FreeDevice>;
template class Block<detail::FreeHost>;

Status upload(DeviceBuffer& dst, const void* src, size_t bytes, cudaStream_t stream) {
  TUNABLEOP_RETURN_IF_ERROR(dst.ensure(bytes));
  TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst.get(), src, bytes, cudaMemcpyHostToDevice, stream));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status::ok();
}

Status Stream::create() {
  cudaStream_t s = nullptr;
  TUNABLEOP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  s_.reset(s);
  return Status::ok();
}

Status GraphExec::end_capture(cudaStream_t stream) {
  exec_.reset();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Status st = cuda_status(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  if (st.is_ok()) st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (graph) cudaGraphDestroy(graph);
  if (!st.is_ok()) {
    (void)cudaGetLastError();
    return st;
  }
  exec_.reset(exec);
  return Status::ok();
}

Status GraphExec::launch(cudaStream_t stream) const {
  TUNABLEOP_CUDA_TRY(cudaGraphLaunch(exec_.get(), stream));
  return Status::ok();
}

}  // namespace tunableop::cuda
