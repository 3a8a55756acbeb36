#include "llm/cuda/cudnn_gate.h"

#include "cuda_common/cudnn_library.h"

#ifdef TUNABLEOP_HAVE_CUDNN_LIBRARY
#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace tunableop::llm::cuda {
namespace {

using ::tunableop::cuda::cudnn_api;
using ::tunableop::cuda::cudnn_config_nondeterministic;
using ::tunableop::cuda::cudnn_config_tag;
using ::tunableop::cuda::CudnnApi;
using ::tunableop::cuda::CudnnDesc;

// Descriptors (destroyed with the builder, or with whoever takes them) and the first failure.
class Builder {
 public:
  explicit Builder(const CudnnApi* a) : a_(a) {}

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t) {
    if (!ok()) return nullptr;
    descs_.push_back(std::make_unique<CudnnDesc>(a_, t));
    check(descs_.back()->created(), "create descriptor");
    return descs_.back()->get();
  }
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t count,
           const void* v, const char* what) {
    if (ok() && d) check(a_->set_attr(d, n, t, count, v), what);
  }
  void finalize(cudnnBackendDescriptor_t d, const std::string& what) {
    if (ok() && d) check(a_->finalize(d), what);
  }
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const std::array<int64_t, 3>& dims,
                                  const std::array<int64_t, 3>& strides, bool is_virtual) {
    auto d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor type");
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims.data(), "tensor dims");
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides.data(), "tensor strides");
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual");
    finalize(d, "tensor");
    return d;
  }
  void op(cudnnBackendDescriptor_t o) {
    if (ok() && o) ops_.push_back(o);
  }
  void check(cudnnStatus_t st, const std::string& what) {
    if (st != CUDNN_STATUS_SUCCESS && ok()) status_ = a_->error(st, what);
  }
  bool ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  std::vector<std::unique_ptr<CudnnDesc>> release() { return std::move(descs_); }

 private:
  const CudnnApi* a_;
  std::vector<std::unique_ptr<CudnnDesc>> descs_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  Status status_ = Status::ok();
};

enum Uid : int64_t { kX = 1, kW, kUp, kOut, kGate = 100, kAct };

}  // namespace

struct CudnnGate::Plan {
  std::vector<std::unique_ptr<CudnnDesc>> descs;  // the plan's
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
  struct Pack {
    std::vector<std::unique_ptr<CudnnDesc>> descs;
    cudnnBackendDescriptor_t pack = nullptr;
  };
  // Per pointer set (x, w, up, out, workspace): one per layer (w differs) and buffer set; the
  // engine's buffers rarely move, so a prefill reuses its layers' packs.
  std::map<std::array<const void*, 5>, Pack> packs;  // destroyed before the plan's descriptors
};

// One shape's graph, the configurations cuDNN offers for it and the plans built so far.
struct CudnnGate::Shape {
  Status status = Status::ok();                   // the graph's or the heuristics' failure
  std::vector<std::unique_ptr<CudnnDesc>> descs;  // graph, heuristics, configurations
  std::vector<cudnnBackendDescriptor_t> cfgs;     // offered, without repeats
  std::vector<std::string> tags;                  // per configuration
  std::vector<std::shared_ptr<Plan>> plans;       // per configuration; null: not built (yet)
  std::vector<Status> failed;                     // per configuration: why its plan did not build
  // Members go in reverse order: the plans before the descriptors they were built from.
};

CudnnGate::~CudnnGate() {
  shapes_.clear();
  auto a = cudnn_api();
  if (handle_ && a.is_ok()) (*a)->destroy(static_cast<cudnnHandle_t>(handle_));
}

int64_t CudnnGate::version() {
  auto a = cudnn_api();
  return a.is_ok() && (*a)->get_version ? int64_t((*a)->get_version()) : 0;
}

namespace {

// The operation graph, then the configurations of heuristics mode A and of the fallback list
// (a mode that offers none is skipped), into `shape`.
Status enumerate(const CudnnApi* a, cudnnHandle_t handle, Act act, int64_t rows, int64_t in, int64_t n,
                 std::vector<std::unique_ptr<CudnnDesc>>* descs, std::vector<cudnnBackendDescriptor_t>* cfgs,
                 std::vector<std::string>* tags) {
  Builder g(a);
  const cudnnDataType_t bf = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto x = g.tensor(kX, bf, {1, rows, in}, {rows * in, in, 1}, false);
  auto w = g.tensor(kW, bf, {1, in, n}, {n * in, 1, in}, false);  // W_gate^T: (k, j) at j * in + k
  auto up = g.tensor(kUp, bf, {1, rows, n}, {rows * n, n, 1}, false);
  auto out = g.tensor(kOut, bf, {1, rows, n}, {rows * n, n, 1}, false);
  auto gate = g.tensor(kGate, f32, {1, rows, n}, {rows * n, n, 1}, true);
  auto actv = g.tensor(kAct, f32, {1, rows, n}, {rows * n, n, 1}, true);

  auto mm = g.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  g.set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul precision");
  g.finalize(mm, "matmul");
  auto mop = g.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  g.set(mop, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "matmul a");
  g.set(mop, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w, "matmul b");
  g.set(mop, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gate, "matmul c");
  g.set(mop, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul desc");
  g.finalize(mop, "matmul op");
  g.op(mop);

  auto pointwise = [&](cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t in0, cudnnBackendDescriptor_t in1,
                       cudnnBackendDescriptor_t y) {
    auto pw = g.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    g.set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    g.set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32, "pointwise precision");
    if (mode == CUDNN_POINTWISE_SWISH_FWD) {
      const double beta = 1.0;  // SiLU
      g.set(pw, CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, 1, &beta, "swish beta");
    }
    g.finalize(pw, "pointwise");
    auto o = g.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    g.set(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pointwise op");
    g.set(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in0, "pointwise x");
    if (in1) g.set(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in1, "pointwise b");
    g.set(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pointwise y");
    g.finalize(o, "pointwise op");
    g.op(o);
  };
  const cudnnPointwiseMode_t mode = act == Act::kSilu       ? CUDNN_POINTWISE_SWISH_FWD
                                    : act == Act::kGeluTanh ? CUDNN_POINTWISE_GELU_APPROX_TANH_FWD
                                                            : CUDNN_POINTWISE_GELU_FWD;
  pointwise(mode, gate, nullptr, actv);
  pointwise(CUDNN_POINTWISE_MUL, actv, up, out);

  auto graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(g.ops().size()), g.ops().data(),
        "graph ops");
  g.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle");
  g.finalize(graph, "operation graph");
  if (!g.ok()) return g.status();
  *descs = g.release();

  Status last = Status::unsupported("cuDNN: no engine for the gate graph");
  const std::pair<cudnnBackendHeurMode_t, const char*> modes[] = {{CUDNN_HEUR_MODE_A, "A"},
                                                                  {CUDNN_HEUR_MODE_FALLBACK, "F"}};
  for (const auto& [hm, letter] : modes) {
    Builder h(a);  // a mode that fails leaves the other's configurations
    auto heur = h.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    h.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristic graph");
    h.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, "heuristic mode");
    h.finalize(heur, "engine heuristics");
    int64_t count = 0;
    if (h.ok())
      h.check(a->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "heuristic count");
    std::vector<cudnnBackendDescriptor_t> got(static_cast<size_t>(std::max<int64_t>(count, 0)));
    for (auto& c : got) c = h.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (h.ok() && count > 0)
      h.check(
          a->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, got.data()),
          "heuristic results");
    if (!h.ok()) {
      last = h.status();
      continue;
    }
    for (int64_t i = 0; i < count && i < int64_t(got.size()); ++i) {
      std::string tag = cudnn_config_tag(a, got[size_t(i)], std::string(letter) + std::to_string(i));
      if (std::find(tags->begin(), tags->end(), tag) != tags->end()) continue;  // offered by mode A already
      if (cudnn_config_nondeterministic(a, got[size_t(i)])) continue;           // a kept choice gives the same bits
      cfgs->push_back(got[size_t(i)]);
      tags->push_back(std::move(tag));
    }
    for (auto& d : h.release()) descs->push_back(std::move(d));
  }
  return cfgs->empty() ? last : Status::ok();
}

}  // namespace

Status CudnnGate::ensure_handle() {
  auto a_or = cudnn_api();
  if (!a_or.is_ok()) return a_or.status();
  if (!handle_) {
    cudnnHandle_t h = nullptr;
    cudnnStatus_t st = (*a_or)->create(&h);
    if (st != CUDNN_STATUS_SUCCESS) return (*a_or)->error(st, "cudnnCreate");
    handle_ = h;
  }
  return Status::ok();
}

StatusOr<std::vector<std::string>> CudnnGate::configs(Act act, int64_t rows, int64_t in, int64_t n,
                                                      const std::string& only, int limit) {
  TUNABLEOP_RETURN_IF_ERROR(ensure_handle());
  const CudnnApi* a = *cudnn_api();
  if (rows <= 0 || in <= 0 || n <= 0) return Status::invalid_argument("cuDNN gate: empty shape");
  if (in % 8 || n % 8) return Status::unsupported("cuDNN gate: in and n must be multiples of 8");
  const auto handle = static_cast<cudnnHandle_t>(handle_);
  std::shared_ptr<Shape>& sh = shapes_[std::make_tuple(int(act), rows, in, n)];
  if (!sh) {
    sh = std::make_shared<Shape>();
    sh->status = enumerate(a, handle, act, rows, in, n, &sh->descs, &sh->cfgs, &sh->tags);
    sh->plans.resize(sh->cfgs.size());
    sh->failed.assign(sh->cfgs.size(), Status::ok());
  }
  if (!sh->status.is_ok()) return sh->status;
  Status last = Status::unsupported(only.empty() ? "cuDNN: no configuration of the gate graph builds"
                                                 : "cuDNN: no configuration " + only + " of the gate graph");
  std::vector<std::string> tags;
  for (size_t i = 0; i < sh->cfgs.size(); ++i) {
    if (!only.empty() && sh->tags[i] != only) continue;
    if (limit > 0 && int(tags.size()) >= limit) break;
    if (!sh->plans[i] && sh->failed[i].is_ok()) {
      Builder p(a);
      auto plan = p.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "plan handle");
      p.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sh->cfgs[i],
            "plan config");
      p.finalize(plan, "execution plan " + sh->tags[i]);
      int64_t got = 0, ws = 0;
      if (p.ok())
        p.check(a->get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws),
                "workspace size");
      if (!p.ok()) {
        sh->failed[i] = p.status();
      } else {
        auto pl = std::make_shared<Plan>();
        pl->descs = p.release();
        pl->plan = plan;
        pl->workspace = ws;
        sh->plans[i] = std::move(pl);
      }
    }
    if (sh->plans[i]) {
      tags.push_back(sh->tags[i]);
    } else {
      last = sh->failed[i];
    }
  }
  if (tags.empty()) return last;
  return tags;
}

void CudnnGate::keep_only(Act act, int64_t rows, int64_t in, int64_t n, const std::string& tag) {
  auto it = shapes_.find(std::make_tuple(int(act), rows, in, n));
  if (it == shapes_.end()) return;
  Shape& sh = *it->second;
  for (size_t i = 0; i < sh.plans.size(); ++i)
    if (tag.empty() || sh.tags[i] != tag) sh.plans[i].reset();
}

Status CudnnGate::run(cudaStream_t stream, Act act, int64_t rows, int64_t in, int64_t n, const void* x,
                      const void* w_gate, const void* up, void* out, const std::string& tag) {
  auto a_or = cudnn_api();
  if (!a_or.is_ok()) return a_or.status();
  const CudnnApi* a = *a_or;
  if (rows <= 0 || n <= 0) return Status::ok();
  for (const void* p : {x, w_gate, up, static_cast<const void*>(out)})
    if (reinterpret_cast<uintptr_t>(p) % 16) return Status::unsupported("cuDNN gate: 16-byte aligned operands");
  auto built = configs(act, rows, in, n, tag, tag.empty() ? 1 : 0);
  if (!built.is_ok()) return built.status();
  const Shape& sh = *shapes_.at(std::make_tuple(int(act), rows, in, n));
  Plan* found = nullptr;
  for (size_t i = 0; i < sh.cfgs.size() && !found; ++i)
    if (sh.plans[i] && (tag.empty() || sh.tags[i] == tag)) found = sh.plans[i].get();
  if (!found) return Status::internal("cuDNN gate: a built plan went missing");
  Plan& pl = *found;
  if (pl.workspace > 0 && workspace_.bytes() < size_t(pl.workspace))
    TUNABLEOP_RETURN_IF_ERROR(workspace_.ensure(size_t(pl.workspace)));
  void* ws = pl.workspace > 0 ? workspace_.get() : nullptr;
  const std::array<const void*, 5> ptrs = {x, w_gate, up, out, ws};
  cudnnBackendDescriptor_t pack = nullptr;
  if (auto found = pl.packs.find(ptrs); found != pl.packs.end()) pack = found->second.pack;
  if (!pack) {
    Builder b(a);
    const int64_t uids[4] = {kX, kW, kUp, kOut};
    void* data[4] = {const_cast<void*>(x), const_cast<void*>(w_gate), const_cast<void*>(up), out};
    pack = b.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    b.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 4, uids, "pack uids");
    b.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 4, data, "pack pointers");
    b.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, "pack workspace");
    b.finalize(pack, "variant pack");
    if (!b.ok()) return b.status();
    if (pl.packs.size() >= 512) pl.packs.clear();  // buffers that keep moving: start again
    pl.packs.emplace(ptrs, Plan::Pack{b.release(), pack});
  }
  cudnnStatus_t st = a->set_stream(static_cast<cudnnHandle_t>(handle_), stream);
  if (st != CUDNN_STATUS_SUCCESS) return a->error(st, "cudnnSetStream");
  st = a->execute(static_cast<cudnnHandle_t>(handle_), pl.plan, pack);
  if (st != CUDNN_STATUS_SUCCESS) return Status::device_error(a->error(st, "execute (gate)").message());
  return Status::ok();
}

}  // namespace tunableop::llm::cuda

#else  // no cuDNN headers at build time: the engine keeps its unfused path

namespace tunableop::llm::cuda {
struct CudnnGate::Plan {};
struct CudnnGate::Shape {};
CudnnGate::~CudnnGate() = default;
void CudnnGate::keep_only(Act, int64_t, int64_t, int64_t, const std::string&) {}
int64_t CudnnGate::version() { return 0; }
StatusOr<std::vector<std::string>> CudnnGate::configs(Act, int64_t, int64_t, int64_t, const std::string&, int) {
  return Status::unsupported("cuDNN gate: built without cudnn_graph.h");
}
Status CudnnGate::run(cudaStream_t, Act, int64_t, int64_t, int64_t, const void*, const void*, const void*, void*,
                      const std::string&) {
  return Status::unsupported("cuDNN gate: built without cudnn_graph.h");
}
}  // namespace tunableop::llm::cuda

#endif
