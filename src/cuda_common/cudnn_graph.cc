#include "cuda_common/cudnn_graph.h"

#ifdef TUNABLEOP_HAVE_CUDNN_LIBRARY

#include <algorithm>

namespace tunableop::cuda {

cudnnBackendDescriptor_t CudnnGraph::make(cudnnBackendDescriptorType_t type) {
  if (!ok()) return nullptr;
  descs_.push_back(std::make_unique<CudnnDesc>(api_, type));
  fail(descs_.back()->created(), "create descriptor");
  return descs_.back()->get();
}

void CudnnGraph::set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                     int64_t count, const void* value, const char* what) {
  if (ok() && d) fail(api_->set_attr(d, name, type, count, value), what);
}

void CudnnGraph::finalize(cudnnBackendDescriptor_t d, const std::string& what) {
  if (ok() && d) fail(api_->finalize(d), what);
}

void CudnnGraph::fail(cudnnStatus_t st, const std::string& what) {
  if (st != CUDNN_STATUS_SUCCESS && ok()) status_ = api_->error(st, what);
}

cudnnBackendDescriptor_t CudnnGraph::tensor_of(int64_t uid, cudnnDataType_t dt, int64_t rank, const int64_t* dims,
                                               const int64_t* strides, bool is_virtual, bool by_value) {
  auto d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t align = 16;
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, dims, "tensor dims");
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, strides, "tensor strides");
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual");
  if (by_value) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
  finalize(d, "tensor");
  return d;
}

cudnnBackendDescriptor_t CudnnGraph::scalar(int64_t uid, cudnnDataType_t dt) {
  const int64_t one[4] = {1, 1, 1, 1};
  return tensor(uid, dt, one, one, false, true);
}

void CudnnGraph::pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                           cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                           int64_t axis) {
  auto pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
  set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
  if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
  if (mode == CUDNN_POINTWISE_SWISH_FWD) {
    const double beta = 1.0;  // SiLU
    set(pw, CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, 1, &beta, "swish beta");
  }
  finalize(pw, "pointwise");
  auto op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pointwise op");
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pointwise x");
  if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "pointwise b");
  if (t) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, "pointwise t");
  set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise y");
  finalize(op, "pointwise op");
  if (ok()) ops_.push_back(op);
}

void CudnnGraph::reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  auto red = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  set(red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduction mode");
  set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction precision");
  finalize(red, "reduction");
  auto op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reduction x");
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reduction y");
  set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red, "reduction desc");
  finalize(op, "reduction op");
  if (ok()) ops_.push_back(op);
}

void CudnnGraph::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
  auto mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul precision");
  finalize(mm, "matmul");
  auto op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul a");
  set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, "matmul b");
  set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul c");
  set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul desc");
  finalize(op, "matmul op");
  if (ok()) ops_.push_back(op);
}

cudnnBackendDescriptor_t CudnnGraph::graph(cudnnHandle_t handle, const std::string& what) {
  auto g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()), ops_.data(), "graph ops");
  set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle");
  finalize(g, what);
  return g;
}

StatusOr<std::vector<cudnnBackendDescriptor_t>> cudnn_heuristic_configs(const CudnnApi* api,
                                                                        cudnnBackendDescriptor_t graph,
                                                                        cudnnBackendHeurMode_t mode,
                                                                        CudnnDescs* descs) {
  CudnnGraph h(api);
  auto heur = h.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  h.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristic graph");
  h.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristic mode");
  h.finalize(heur, "engine heuristics");
  int64_t count = 0;
  if (h.ok())
    h.fail(api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
           "heuristic result count");
  std::vector<cudnnBackendDescriptor_t> got(size_t(std::max<int64_t>(count, 0)));
  for (auto& c : got) c = h.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  if (h.ok() && count > 0)
    h.fail(api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, got.data()),
           "heuristic results");
  if (!h.ok()) return h.status();
  got.resize(size_t(std::clamp<int64_t>(count, 0, int64_t(got.size()))));
  for (auto& d : h.take()) descs->push_back(std::move(d));
  return got;
}

StatusOr<CudnnPlan> cudnn_execution_plan(const CudnnApi* api, cudnnHandle_t handle, cudnnBackendDescriptor_t cfg,
                                         const std::string& what) {
  CudnnGraph p(api);
  auto plan = p.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "plan handle");
  p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, "plan engine config");
  p.finalize(plan, what);
  int64_t got = 0, workspace = 0;
  if (p.ok())
    p.fail(api->get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &workspace),
           "plan workspace size");
  if (!p.ok()) return p.status();
  CudnnPlan out;
  out.descs = p.take();
  out.plan = plan;
  out.workspace = workspace;
  return out;
}

StatusOr<CudnnPack> cudnn_variant_pack(const CudnnApi* api, const std::vector<int64_t>& uids,
                                       const std::vector<void*>& pointers, void* workspace) {
  if (uids.size() != pointers.size()) return Status::internal("cuDNN variant pack: uids and pointers differ in count");
  CudnnGraph g(api);
  auto pack = g.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  g.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data(), "pack uids");
  g.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()), pointers.data(),
        "pack pointers");
  g.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "pack workspace");
  g.finalize(pack, "variant pack");
  if (!g.ok()) return g.status();
  CudnnPack out;
  out.descs = g.take();
  out.pack = pack;
  return out;
}

}  // namespace tunableop::cuda

#endif
