// One builder of cuDNN backend-API graphs (cudnn_library.h opens the library), shared by the
// CUDA backend's SDPA candidates and the engine's prefill gate: descriptors kept by their owner,
// the first failure remembered (so that a graph reads as a straight list of calls), the
// operations of a graph, the configurations cuDNN's heuristics offer, execution plans and
// variant packs. Declared only where cudnn_graph.h was found (TUNABLEOP_HAVE_CUDNN_LIBRARY).
#pragma once

#include "cuda_common/cudnn_library.h"

#ifdef TUNABLEOP_HAVE_CUDNN_LIBRARY

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::cuda {

using CudnnDescs = std::vector<std::unique_ptr<CudnnDesc>>;

class CudnnGraph {
 public:
  // Virtual tensors made by virtual_tensor() get uids from `first_virtual_uid` up.
  explicit CudnnGraph(const CudnnApi* api, int64_t first_virtual_uid = 100)
      : api_(api), next_virtual_(first_virtual_uid) {}

  // --- Descriptors. After a failure every call does nothing; status() says what failed first.
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type);
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void* value, const char* what);
  void finalize(cudnnBackendDescriptor_t d, const std::string& what);
  void fail(cudnnStatus_t st, const std::string& what);  // records st unless it is success
  bool ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  CudnnDescs take() { return std::move(descs_); }  // the descriptors made so far, to keep

  // --- Tensors (16-byte aligned), of any rank up to 8.
  template <size_t N>
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const int64_t (&dims)[N],
                                  const int64_t (&strides)[N], bool is_virtual, bool by_value = false) {
    return tensor_of(uid, dt, int64_t(N), dims, strides, is_virtual, by_value);
  }
  template <size_t N>
  cudnnBackendDescriptor_t virtual_tensor(cudnnDataType_t dt, const int64_t (&dims)[N], const int64_t (&strides)[N]) {
    return tensor_of(next_virtual_++, dt, int64_t(N), dims, strides, true, false);
  }
  cudnnBackendDescriptor_t scalar(int64_t uid, cudnnDataType_t dt);  // passed by value at execution

  // --- Operations, appended to the graph in order.
  // y = mode(x[, b[, t]]) elementwise at precision `prec`; `axis` >= 0 for GEN_INDEX (and the
  // index arithmetic); SWISH_FWD gets beta 1 (SiLU).
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1);
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);  // fp32
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);     // fp32
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  // The operation graph of the operations so far, for `handle`.
  cudnnBackendDescriptor_t graph(cudnnHandle_t handle, const std::string& what = "operation graph");

 private:
  cudnnBackendDescriptor_t tensor_of(int64_t uid, cudnnDataType_t dt, int64_t rank, const int64_t* dims,
                                     const int64_t* strides, bool is_virtual, bool by_value);
  const CudnnApi* api_;
  CudnnDescs descs_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  Status status_ = Status::ok();
  int64_t next_virtual_;
};

// The engine configurations heuristics `mode` offers for `graph`, in its order (empty: it
// offers none); their descriptors join *descs.
StatusOr<std::vector<cudnnBackendDescriptor_t>> cudnn_heuristic_configs(const CudnnApi* api,
                                                                        cudnnBackendDescriptor_t graph,
                                                                        cudnnBackendHeurMode_t mode, CudnnDescs* descs);

// The execution plan of configuration `cfg` for `handle`, and its workspace bytes.
struct CudnnPlan {
  CudnnDescs descs;  // the plan's
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
};
StatusOr<CudnnPlan> cudnn_execution_plan(const CudnnApi* api, cudnnHandle_t handle, cudnnBackendDescriptor_t cfg,
                                         const std::string& what);

// A variant pack: the pointers of the graph's tensors by uid, and the workspace.
struct CudnnPack {
  CudnnDescs descs;
  cudnnBackendDescriptor_t pack = nullptr;
};
StatusOr<CudnnPack> cudnn_variant_pack(const CudnnApi* api, const std::vector<int64_t>& uids,
                                       const std::vector<void*>& pointers, void* workspace);

}  // namespace tunableop::cuda

#endif
