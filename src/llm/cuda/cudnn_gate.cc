#include "llm/cuda/cudnn_gate.h"

#include "cuda_common/cudnn_graph.h"
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

using Builder = ::tunableop::cuda::CudnnGraph;  // the shared builder (src/cuda_common/cudnn_graph.h)
using ::tunableop::cuda::cudnn_execution_plan;
using ::tunableop::cuda::cudnn_heuristic_configs;
using ::tunableop::cuda::cudnn_variant_pack;

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
  const int64_t rows_in[3] = {1, rows, in}, rows_in_strides[3] = {rows * in, in, 1};
  const int64_t in_n[3] = {1, in, n}, in_n_strides[3] = {n * in, 1, in};  // W_gate^T: (k, j) at j * in + k
  const int64_t rows_n[3] = {1, rows, n}, rows_n_strides[3] = {rows * n, n, 1};
  auto x = g.tensor(kX, bf, rows_in, rows_in_strides, false);
  auto w = g.tensor(kW, bf, in_n, in_n_strides, false);
  auto up = g.tensor(kUp, bf, rows_n, rows_n_strides, false);
  auto out = g.tensor(kOut, bf, rows_n, rows_n_strides, false);
  auto gate = g.tensor(kGate, f32, rows_n, rows_n_strides, true);
  auto actv = g.tensor(kAct, f32, rows_n, rows_n_strides, true);
  g.matmul(x, w, gate);

  const cudnnPointwiseMode_t mode = act == Act::kSilu       ? CUDNN_POINTWISE_SWISH_FWD
                                    : act == Act::kGeluTanh ? CUDNN_POINTWISE_GELU_APPROX_TANH_FWD
                                                            : CUDNN_POINTWISE_GELU_FWD;
  g.pointwise(mode, f32, gate, nullptr, nullptr, actv);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, actv, up, nullptr, out);
  auto graph = g.graph(handle);
  if (!g.ok()) return g.status();
  *descs = g.take();

  Status last = Status::unsupported("cuDNN: no engine for the gate graph");
  const std::pair<cudnnBackendHeurMode_t, const char*> modes[] = {{CUDNN_HEUR_MODE_A, "A"},
                                                                  {CUDNN_HEUR_MODE_FALLBACK, "F"}};
  for (const auto& [hm, letter] : modes) {
    auto got = cudnn_heuristic_configs(a, graph, hm, descs);  // a mode that fails leaves the other's
    if (!got.is_ok()) {
      last = got.status();
      continue;
    }
    for (size_t i = 0; i < got->size(); ++i) {
      std::string tag = cudnn_config_tag(a, (*got)[i], std::string(letter) + std::to_string(i));
      if (std::find(tags->begin(), tags->end(), tag) != tags->end()) continue;  // offered by mode A already
      if (cudnn_config_nondeterministic(a, (*got)[i])) continue;                // a kept choice gives the same bits
      cfgs->push_back((*got)[i]);
      tags->push_back(std::move(tag));
    }
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
      auto built = cudnn_execution_plan(a, handle, sh->cfgs[i], "execution plan " + sh->tags[i]);
      if (!built.is_ok()) {
        sh->failed[i] = built.status();
      } else {
        auto pl = std::make_shared<Plan>();
        pl->descs = std::move(built->descs);
        pl->plan = built->plan;
        pl->workspace = built->workspace;
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
    auto made = cudnn_variant_pack(a, {kX, kW, kUp, kOut},
                                   {const_cast<void*>(x), const_cast<void*>(w_gate), const_cast<void*>(up), out}, ws);
    if (!made.is_ok()) return made.status();
    pack = made->pack;
    if (pl.packs.size() >= 512) pl.packs.clear();  // buffers that keep moving: start again
    pl.packs.emplace(ptrs, Plan::Pack{std::move(made->descs), pack});
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
