// cuDNN 9's backend graph API opened at run time (dlopen: nothing links against cuDNN), shared by
// the CUDA backend's SDPA candidate and the engine's prefill gate GEMM: one loader, descriptors
// destroyed with their owner, and the name of an engine configuration. Declared only where
// cudnn_graph.h is on the include path (cuda_common's CMakeLists looks for it); users test
// TUNABLEOP_HAVE_CUDNN_LIBRARY and build a stub without it.
#pragma once

#if __has_include(<cudnn_graph.h>)
#define TUNABLEOP_HAVE_CUDNN_LIBRARY 1

#include <cudnn_graph.h>

#include <cstddef>
#include <string>

#include "tunableop/status.h"

namespace tunableop::cuda {

struct CudnnApi {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnGetLastErrorString) last_error = nullptr;  // optional
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_desc = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_desc = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attr = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attr = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  std::string path;
  size_t version = 0;

  // "cuDNN what: CUDNN_STATUS_... (the library's last error message)", as unsupported: a cuDNN
  // failure means this path cannot serve the problem, not that the caller erred.
  Status error(cudnnStatus_t st, const std::string& what) const;
};

// The library, loaded once per process: $TUNABLEOP_CUDNN_LIBRARY first, then libcudnn.so.9 on
// the loader's search path; unsupported (saying what was tried) without it or before 9.0.
StatusOr<const CudnnApi*> cudnn_api();

// One backend descriptor, destroyed with its owner.
class CudnnDesc {
 public:
  CudnnDesc(const CudnnApi* api, cudnnBackendDescriptorType_t type);
  ~CudnnDesc();
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnStatus_t created() const { return status_; }

 private:
  const CudnnApi* api_;
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_;
};

// An engine configuration's name: "eng<global index>" and "_k<knob type>v<value>" per knob
// choice (as cudnn-frontend names its plans); `fallback` where cuDNN does not say.
std::string cudnn_config_tag(const CudnnApi* api, cudnnBackendDescriptor_t cfg, const std::string& fallback);

// Whether the configuration's engine carries cuDNN's NONDETERMINISTIC numerical note (results
// may differ run to run, e.g. atomics over split keys); false where cuDNN does not say.
bool cudnn_config_nondeterministic(const CudnnApi* api, cudnnBackendDescriptor_t cfg);

}  // namespace tunableop::cuda

#endif
