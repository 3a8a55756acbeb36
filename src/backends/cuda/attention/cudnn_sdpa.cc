// cuDNN's fused attention (SDPA forward) as a candidate, through the cuDNN 9 backend graph API
// with the library loaded at run time (dlopen): nothing links against cuDNN, and a machine
// without it says so once and offers no candidate.
//
// The graph is the pattern cuDNN's fused-attention engines recognise (the one its frontend
// library builds for SDPA inference):
//   S = Q x K^T (matmul, fp32)            Q [b,hq,sq,d], K^T [b,hk,d,skv] (GQA: hk divides hq)
//   S = S * scale                          (pointwise MUL, by-value scalar)
//   causal: row = gen_index(S, axis 2) [+ skv - sq for bottom-right alignment],
//           col = gen_index(S, axis 3), S = select(row >= col ? S : -inf)
//   softmax: M = max_k S, E = exp(S - M), Z = sum_k E, P = E / Z (stats log(Z) + M: virtual, or
//            an fp32 output [b,hq,sq,1] where a caller merges partial attentions)
//   O = P x V (matmul; P in the storage type)  V [b,hk,skv,d], O [b,hq,sq,d]
// Q and O are addressed in our [b][s][h][d] rows (strides b: s*row_stride, h: d, s: row_stride)
// and K, V in the engine's contiguous cache [b][hk][max_seq][d]: no copies.
#include "backends/cuda/attention/cudnn_sdpa.h"

#include <cudnn_graph.h>
#include <fmt/format.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"
#include "cuda_common/cudnn_graph.h"
#include "cuda_common/cudnn_library.h"

namespace tunableop::cuda {

namespace {

// ---- Descriptors --------------------------------------------------------------------------

enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kScale,
  kNegInf,
  kSkv,
  kSq,
  kStats,
  kVirtual = 100  // virtual tensors count up from here
};

// The shared builder (src/cuda_common/cudnn_graph.h); virtual tensors count up from kVirtual.
struct GraphBuilder : CudnnGraph {
  explicit GraphBuilder(const CudnnApi* api) : CudnnGraph(api, kVirtual) {}
};

// ---- Plans ---------------------------------------------------------------------------------

struct Plan {
  std::vector<std::unique_ptr<CudnnDesc>> descs;  // the execution plan's descriptors
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
  bool bottom_right = false;  // causal with q_len < kv_len: skv and sq scalars in the pack
  bool causal_mask = false;
  bool stats = false;  // writes each row's log-sum-exp (kStats)
  std::string tag;     // the engine configuration's ("eng8_k3v1...")
};

// The candidates: `Attn_Cudnn_Sdpa` is the first configuration of heuristics mode A that
// finalises (what cuDNN would pick); the others name a configuration by its place in one of
// cuDNN's lists: `_a<r>` the r-th of mode A, `_f<r>` the r-th of the fallback list that mode A
// does not offer too, `_v<r>` the r-th neighbour of mode A's first configuration (one knob one
// stride below or above its value, knobs in the engine's order; see add_variations). cuDNN's
// heuristics are deterministic for one library, GPU and problem, so a name means the same
// configuration in every process that reads the results file.
struct Slot {
  const char* suffix;  // "" for the first that finalises
  char mode;           // 'A', 'F' or 'V'; 0: the first of mode A that finalises
  int rank;
};
constexpr Slot kSlots[] = {{"", 0, 0},      {"_a1", 'A', 1}, {"_a2", 'A', 2}, {"_a3", 'A', 3}, {"_f0", 'F', 0},
                           {"_f1", 'F', 1}, {"_v0", 'V', 0}, {"_v1", 'V', 1}, {"_v2", 'V', 2}, {"_v3", 'V', 3}};
constexpr int kVariations = 4;  // _v0.._v3: see add_variations
constexpr int kNumSlots = int(sizeof(kSlots) / sizeof(kSlots[0]));
// Only problems with at least this many queries get the extra slots: a plan takes ~0.5 s to
// build, and decode problems (one to a few queries, many kv lengths) keep cuDNN's pick.
constexpr int64_t kExtraSlotMinQueries = 128;

// One problem's graph, the configurations cuDNN offers for it (mode A, then the fallback list
// without repeats), the plans built so far and each slot's pick.
struct Problem {
  Status status = Status::ok();                   // the graph's failure
  Status mode_a = Status::ok();                   // heuristics mode A's failure
  std::vector<std::unique_ptr<CudnnDesc>> descs;  // graph, heuristics, configurations
  struct Config {
    cudnnBackendDescriptor_t cfg = nullptr;
    std::string tag;
    char mode = 'A';
    int rank = 0;
    bool built = false;
    std::shared_ptr<Plan> plan;  // null: not built (yet) or failed
    Status failure = Status::ok();
  };
  std::vector<Config> cfgs;
  bool bottom_right = false, causal_mask = false, stats = false;
  std::string signature;
  std::vector<std::unique_ptr<StatusOr<std::shared_ptr<Plan>>>> slots =
      std::vector<std::unique_ptr<StatusOr<std::shared_ptr<Plan>>>>(kNumSlots);
};

bool log_configs() {
  static const bool on = [] {
    const char* env = std::getenv("TUNABLEOP_CUDNN_SDPA_LOG");
    return env && *env && *env != '0';
  }();
  return on;
}

// "eng8_k24v3_k14v2" -> 8, {(24, 3), (14, 2)}; false for a tag of another form.
bool parse_tag(const std::string& tag, int64_t* engine, std::vector<std::pair<int64_t, int64_t>>* choices) {
  if (std::sscanf(tag.c_str(), "eng%" SCNd64, engine) != 1) return false;
  size_t at = tag.find("_k");
  while (at != std::string::npos) {
    int64_t t = 0, v = 0;
    if (std::sscanf(tag.c_str() + at, "_k%" SCNd64 "v%" SCNd64, &t, &v) != 2) return false;
    choices->emplace_back(t, v);
    at = tag.find("_k", at + 2);
  }
  return true;
}

// Up to kVariations configurations next to mode A's first one (the same engine and knob
// choices, one knob one stride below or above its value; knobs in the order the engine lists
// them), as mode 'V': cuDNN's heuristics rank tile and kernel choices for large problems, and a
// neighbour may balance a small causal grid better (Gemma-2B's 2048-token prefill). The
// engine's knobs are logged (TUNABLEOP_CUDNN_SDPA_LOG).
void add_variations(const CudnnApi* api, cudnnBackendDescriptor_t graph, Problem* pr) {
  const Problem::Config* root = nullptr;
  for (const auto& c : pr->cfgs)
    if (!root && c.mode == 'A') root = &c;
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> choices;
  if (!root || !parse_tag(root->tag, &engine, &choices)) return;
  GraphBuilder b(api);
  auto eng = b.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  b.set(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "engine graph");
  b.set(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &engine, "engine index");
  b.finalize(eng, "engine");
  std::vector<cudnnBackendDescriptor_t> infos(CUDNN_KNOB_TYPE_COUNTS);
  for (auto& k : infos) k = b.make(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
  int64_t got = 0;
  if (b.ok()) {
    cudnnStatus_t st = api->get_attr(eng, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     int64_t(infos.size()), &got, infos.data());
    if (st != CUDNN_STATUS_SUCCESS) b.fail(st, "knob info");
  }
  struct Knob {
    int64_t type = 0, lo = 0, hi = -1, stride = 1;
  };
  std::vector<Knob> knobs;
  for (int64_t i = 0; b.ok() && i < got && i < int64_t(infos.size()); ++i) {
    cudnnBackendKnobType_t type{};
    Knob k;
    int64_t n = 0;
    cudnnStatus_t st = api->get_attr(infos[size_t(i)], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type);
    if (st == CUDNN_STATUS_SUCCESS)
      st = api->get_attr(infos[size_t(i)], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &k.lo);
    if (st == CUDNN_STATUS_SUCCESS)
      st = api->get_attr(infos[size_t(i)], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &n, &k.hi);
    if (st == CUDNN_STATUS_SUCCESS)
      st = api->get_attr(infos[size_t(i)], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &n, &k.stride);
    if (st != CUDNN_STATUS_SUCCESS) break;
    k.type = int64_t(type), k.stride = std::max<int64_t>(k.stride, 1);
    knobs.push_back(k);
  }
  if (log_configs()) {
    std::string list;
    for (const auto& k : knobs) list += fmt::format(" k{}:[{},{}]/{}", k.type, k.lo, k.hi, k.stride);
    std::fprintf(stderr, "cuDNN SDPA %s: engine %lld knobs:%s%s\n", pr->signature.c_str(), (long long)engine,
                 list.c_str(), b.ok() ? "" : (" (" + b.status().message() + ")").c_str());
  }
  if (!b.ok() || knobs.empty()) return;
  for (auto& d : b.take()) pr->descs.push_back(std::move(d));  // the engine outlives its configurations
  int made = 0;
  for (const auto& k : knobs) {
    size_t at = choices.size();
    for (size_t j = 0; j < choices.size(); ++j)
      if (choices[j].first == k.type) at = j;
    if (at == choices.size()) continue;  // a knob mode A's configuration leaves at its default
    for (const int64_t v : {choices[at].second - k.stride, choices[at].second + k.stride}) {
      if (made >= kVariations) return;
      if (v < k.lo || v > k.hi) continue;
      auto mine = choices;
      mine[at].second = v;
      std::string tag = "eng" + std::to_string(engine);
      for (const auto& [t, val] : mine) tag += "_k" + std::to_string(t) + "v" + std::to_string(val);
      bool seen = false;
      for (const auto& c : pr->cfgs) seen = seen || c.tag == tag;
      if (seen) continue;
      GraphBuilder c(api);  // a value the engine refuses leaves the others
      std::vector<cudnnBackendDescriptor_t> kcs;
      for (const auto& [t, val] : mine) {
        auto kc = c.make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
        const auto type = cudnnBackendKnobType_t(t);
        c.set(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type, "knob choice type");
        c.set(kc, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &val, "knob choice value");
        c.finalize(kc, "knob choice");
        kcs.push_back(kc);
      }
      auto cfg = c.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      c.set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng, "config engine");
      c.set(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(kcs.size()), kcs.data(),
            "config knobs");
      c.finalize(cfg, "engine config");
      if (!c.ok()) {
        if (log_configs())
          std::fprintf(stderr, "cuDNN SDPA %s: variation %s: %s\n", pr->signature.c_str(), tag.c_str(),
                       c.status().message().c_str());
        continue;
      }
      for (auto& d : c.take()) pr->descs.push_back(std::move(d));
      Problem::Config pc;
      pc.cfg = cfg, pc.tag = std::move(tag), pc.mode = 'V', pc.rank = made++;
      pr->cfgs.push_back(std::move(pc));
    }
  }
}

std::string problem_key(const AttentionParams& p, bool stats) {
  return attention_op_signature(p) + "," + attention_params_signature(p) + (stats ? ",stats" : "");
}

std::unique_ptr<Problem> build_problem(const CudnnApi* api, cudnnHandle_t handle, const AttentionParams& p,
                                       bool with_stats) {
  auto pr = std::make_unique<Problem>();
  pr->signature = problem_key(p, with_stats);
  pr->stats = with_stats;
  GraphBuilder g(api);
  const cudnnDataType_t io = p.dtype == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, boolean = CUDNN_DATA_BOOLEAN;
  const int64_t b = p.batch, hq = p.heads, hk = p.kv_heads, sq = p.q_len, skv = p.kv_len, d = p.head_dim;

  auto q = g.tensor(kQ, io, {b, hq, sq, d}, {sq * p.q_row_stride, d, p.q_row_stride, 1}, false);
  auto kt = g.tensor(kK, io, {b, hk, d, skv}, {hk * p.max_seq * d, p.max_seq * d, 1, d}, false);
  auto v = g.tensor(kV, io, {b, hk, skv, d}, {hk * p.max_seq * d, p.max_seq * d, d, 1}, false);
  auto o = g.tensor(kO, io, {b, hq, sq, d}, {sq * p.o_row_stride, d, p.o_row_stride, 1}, false);
  const int64_t s_dims[4] = {b, hq, sq, skv}, s_strides[4] = {hq * sq * skv, sq * skv, skv, 1};
  const int64_t r_dims[4] = {b, hq, sq, 1}, r_strides[4] = {hq * sq, sq, 1, 1};

  auto s = g.virtual_tensor(f32, s_dims, s_strides);
  g.matmul(q, kt, s);
  auto scale = g.scalar(kScale, f32);
  auto scaled = g.virtual_tensor(f32, s_dims, s_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, s, scale, nullptr, scaled);
  auto last = scaled;

  pr->causal_mask = p.causal && sq > 1;  // one query (decode) sees every key: no mask
  pr->bottom_right = pr->causal_mask && sq != skv;
  if (pr->causal_mask) {
    auto row = g.virtual_tensor(i32, s_dims, s_strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, last, nullptr, nullptr, row, 2);
    auto col = g.virtual_tensor(i32, s_dims, s_strides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, last, nullptr, nullptr, col, 3);
    if (pr->bottom_right) {  // row + skv - sq >= col: the queries are the last sq positions
      auto skv_t = g.scalar(kSkv, i32), sq_t = g.scalar(kSq, i32);
      auto plus = g.virtual_tensor(i32, s_dims, s_strides);
      g.pointwise(CUDNN_POINTWISE_ADD, i32, row, skv_t, nullptr, plus, 3);
      auto minus = g.virtual_tensor(i32, s_dims, s_strides);
      g.pointwise(CUDNN_POINTWISE_SUB, i32, plus, sq_t, nullptr, minus, 3);
      row = minus;
    }
    auto keep = g.virtual_tensor(boolean, s_dims, s_strides);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, boolean, row, col, nullptr, keep);
    auto neg_inf = g.scalar(kNegInf, f32);
    auto masked = g.virtual_tensor(f32, s_dims, s_strides);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, last, neg_inf, keep, masked);
    last = masked;
  }

  auto mx = g.virtual_tensor(f32, r_dims, r_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, last, mx);
  auto sub = g.virtual_tensor(f32, s_dims, s_strides);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, last, mx, nullptr, sub);
  auto ex = g.virtual_tensor(f32, s_dims, s_strides);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex);
  auto sum = g.virtual_tensor(f32, r_dims, r_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  auto lg = g.virtual_tensor(f32, r_dims, r_strides);
  g.pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, lg);
  auto stats = with_stats ? g.tensor(kStats, f32, r_dims, r_strides, false) : g.virtual_tensor(f32, r_dims, r_strides);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, mx, lg, nullptr, stats);
  auto prob = g.virtual_tensor(io, s_dims, s_strides);
  g.pointwise(CUDNN_POINTWISE_DIV, f32, ex, sum, nullptr, prob);
  g.matmul(prob, v, o);
  if (!g.ok()) {
    pr->status = g.status();
    return pr;
  }

  auto graph = g.graph(handle, "operation graph (the pattern is not supported)");
  if (!g.ok()) {
    pr->status = g.status();
    return pr;
  }
  pr->descs = g.take();

  // Mode A, then (problems the extra slots serve) the fallback list; a mode that fails leaves
  // the other's configurations.
  const bool extra = p.q_len >= kExtraSlotMinQueries;
  for (const char mode : {'A', 'F'}) {
    if (mode == 'F' && !extra) break;
    const cudnnBackendHeurMode_t hm = mode == 'A' ? CUDNN_HEUR_MODE_A : CUDNN_HEUR_MODE_FALLBACK;
    auto got = cudnn_heuristic_configs(api, graph, hm, &pr->descs);
    if (!got.is_ok() || got->empty()) {
      if (mode == 'A')
        pr->mode_a = got.is_ok() ? Status::unsupported("cuDNN: no engine for this attention graph") : got.status();
      continue;
    }
    int rank = 0;
    for (size_t i = 0; i < got->size(); ++i) {
      std::string tag = cudnn_config_tag(api, (*got)[i], fmt::format("{}{}", char(mode + 32), i));
      // A choice kept in a results file must give the same bits every run (the attention tests
      // check two runs bit for bit): engines cuDNN notes as nondeterministic are no candidates.
      if (cudnn_config_nondeterministic(api, (*got)[i])) {
        if (log_configs())
          std::fprintf(stderr, "cuDNN SDPA %s: %s skipped: nondeterministic\n", pr->signature.c_str(), tag.c_str());
        continue;
      }
      bool seen = false;
      for (const auto& c : pr->cfgs) seen = seen || c.tag == tag;
      if (seen) continue;  // the fallback list repeating mode A
      Problem::Config c;
      c.cfg = (*got)[i], c.tag = std::move(tag), c.mode = mode, c.rank = rank++;
      pr->cfgs.push_back(std::move(c));
    }
  }
  if (extra) add_variations(api, graph, pr.get());
  if (log_configs()) {
    std::string list;
    for (const auto& c : pr->cfgs) list += fmt::format(" {}{}={}", char(c.mode + 32), c.rank, c.tag);
    std::fprintf(stderr, "cuDNN SDPA %s: configurations:%s\n", pr->signature.c_str(), list.c_str());
  }
  return pr;
}

// The plan of configuration i, built on first use.
Status build_config(const CudnnApi* api, cudnnHandle_t handle, Problem& pr, size_t i) {
  Problem::Config& c = pr.cfgs[i];
  if (c.built) return c.plan ? Status::ok() : c.failure;
  c.built = true;
  auto attempt = cudnn_execution_plan(api, handle, c.cfg, "execution plan");
  if (log_configs())
    std::fprintf(stderr, "cuDNN SDPA %s: plan %c%d=%s: %s\n", pr.signature.c_str(), char(c.mode + 32), c.rank,
                 c.tag.c_str(),
                 attempt.is_ok() ? fmt::format("built, workspace {} B", attempt->workspace).c_str()
                                 : attempt.status().message().c_str());
  if (!attempt.is_ok()) {
    c.failure = Status::unsupported(fmt::format("cuDNN configuration {}: {}", c.tag, attempt.status().message()));
    return c.failure;
  }
  auto plan = std::make_shared<Plan>();
  plan->descs = std::move(attempt->descs);
  plan->plan = attempt->plan;
  plan->workspace = attempt->workspace;
  plan->bottom_right = pr.bottom_right;
  plan->causal_mask = pr.causal_mask;
  plan->stats = pr.stats;
  plan->tag = c.tag;
  c.plan = std::move(plan);
  return Status::ok();
}

// Slot `s`'s plan for the problem (see kSlots).
StatusOr<std::shared_ptr<Plan>> pick(const CudnnApi* api, cudnnHandle_t handle, Problem& pr, int s) {
  if (!pr.status.is_ok()) return pr.status;
  const Slot& slot = kSlots[s];
  if (slot.mode == 0) {  // the first of mode A that finalises
    if (!pr.mode_a.is_ok()) return pr.mode_a;
    Status last = Status::unsupported("cuDNN: no engine configuration finalised");
    for (size_t i = 0; i < pr.cfgs.size(); ++i) {
      if (pr.cfgs[i].mode != 'A') continue;
      Status st = build_config(api, handle, pr, i);
      if (st.is_ok()) return pr.cfgs[i].plan;
      last = st;
    }
    return last;
  }
  for (size_t i = 0; i < pr.cfgs.size(); ++i) {
    if (pr.cfgs[i].mode != slot.mode || pr.cfgs[i].rank != slot.rank) continue;
    TUNABLEOP_RETURN_IF_ERROR(build_config(api, handle, pr, i));
    // The configuration Attn_Cudnn_Sdpa runs already (mode A's first ones did not finalise):
    // not timed twice.
    auto first = pick(api, handle, pr, 0);
    if (first.is_ok() && *first == pr.cfgs[i].plan)
      return Status::unsupported(fmt::format("cuDNN configuration {} is Attn_Cudnn_Sdpa's", pr.cfgs[i].tag));
    return pr.cfgs[i].plan;
  }
  return Status::unsupported(
      fmt::format("cuDNN offers no configuration {} for this problem", slot.suffix + 1));  // "a2", "f0"
}

// Problems are built once per (thread, device, problem), plans once per configuration: graph
// finalisation and the runtime compilation of the engine take far longer than a run.
struct ThreadState {
  std::map<int, cudnnHandle_t> handles;
  std::map<std::pair<int, std::string>, std::unique_ptr<Problem>> problems;  // nodes never move
  // The last few problems, newest first: a tuner loop or a decode step repeats one, the split
  // candidate (cudnn_sdpa_split.cc) cycles through three.
  struct Recent {
    Problem* problem = nullptr;
    int dev = -1;
    bool stats = false;
    AttentionParams params;
  };
  Recent recent[4];
};

StatusOr<std::shared_ptr<Plan>> plan_for(const CudnnApi* api, const AttentionParams& p, int slot, bool stats,
                                         cudnnHandle_t* handle_out) {
  thread_local ThreadState state;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  auto& handle = state.handles[dev];
  if (!handle) {
    cudnnStatus_t st = api->create(&handle);
    if (st != CUDNN_STATUS_SUCCESS) {
      handle = nullptr;
      return api->error(st, "cudnnCreate");
    }
  }
  *handle_out = handle;
  // One of the last few problems (the common case: a tuner loop, a decode step, the split's
  // parts) skips formatting the key.
  Problem* pr = nullptr;
  for (const auto& r : state.recent)
    if (!pr && r.problem && r.dev == dev && r.stats == stats && r.params == p) pr = r.problem;
  if (!pr) {
    const auto key = std::make_pair(dev, problem_key(p, stats));
    auto it = state.problems.find(key);
    if (it == state.problems.end()) it = state.problems.emplace(key, build_problem(api, handle, p, stats)).first;
    pr = it->second.get();
    std::move_backward(std::begin(state.recent), std::end(state.recent) - 1, std::end(state.recent));
    state.recent[0] = {pr, dev, stats, p};
  }
  auto& cached = pr->slots[size_t(slot)];
  if (!cached) cached = std::make_unique<StatusOr<std::shared_ptr<Plan>>>(pick(api, handle, *pr, slot));
  return *cached;
}

// Variant packs (the pointers of one call) are cached per thread, keyed by plan and pointers:
// building one costs several library calls, which a decode step of a few microseconds feels.
// Scalars passed by value live in the entry, so the pack's host pointers stay valid.
struct PackEntry {
  const Plan* plan = nullptr;
  const void* ptrs[6] = {};
  float scale = 0, neg_inf = 0;
  int32_t skv = 0, sq = 0;
  std::vector<std::unique_ptr<CudnnDesc>> descs;
  cudnnBackendDescriptor_t pack = nullptr;
};

StatusOr<cudnnBackendDescriptor_t> variant_pack(const CudnnApi* api, const Plan& pl, const AttentionParams& p,
                                                const CudnnSdpaCall& o) {
  thread_local std::deque<std::unique_ptr<PackEntry>> cache;
  void* ws = o.workspace;
  const void* key[6] = {o.q, o.k, o.v, o.out, o.stats, ws};
  for (const auto& e : cache)
    if (e->plan == &pl && std::equal(std::begin(key), std::end(key), std::begin(e->ptrs))) return e->pack;
  auto e = std::make_unique<PackEntry>();
  e->plan = &pl;
  std::copy(std::begin(key), std::end(key), std::begin(e->ptrs));
  e->scale = float(p.softmax_scale());
  e->neg_inf = -std::numeric_limits<float>::infinity();
  e->skv = int32_t(p.kv_len), e->sq = int32_t(p.q_len);
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale};
  std::vector<void*> ptrs = {const_cast<void*>(o.q), const_cast<void*>(o.k), const_cast<void*>(o.v), o.out, &e->scale};
  if (pl.causal_mask) uids.push_back(kNegInf), ptrs.push_back(&e->neg_inf);
  if (pl.stats) uids.push_back(kStats), ptrs.push_back(o.stats);
  if (pl.bottom_right) {
    uids.push_back(kSkv), ptrs.push_back(&e->skv);
    uids.push_back(kSq), ptrs.push_back(&e->sq);
  }
  auto pack = cudnn_variant_pack(api, uids, ptrs, ws);
  if (!pack.is_ok()) return pack.status();
  e->descs = std::move(pack->descs);
  e->pack = pack->pack;
  cudnnBackendDescriptor_t made = e->pack;
  cache.push_back(std::move(e));
  if (cache.size() > 32) cache.pop_front();
  return made;
}

Status supports(const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());  // params as the op passes them: with_defaults applied
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return Status::unsupported("bf16 and fp16 only");
  if (p.paged() || p.var_kv_len || p.var_q_len) return Status::unsupported("contiguous cache with one length only");
  if (p.window > 0 || p.softcap > 0) return Status::unsupported("no sliding window or softcapping in our graph");
  if (p.head_dim > 256 || p.head_dim % 8) return Status::unsupported("head_dim <= 256, multiple of 8");
  if (p.q_row_stride % 8 || p.o_row_stride % 8) return Status::unsupported("row strides must be multiples of 8");
  auto api = cudnn_api();
  return api.is_ok() ? Status::ok() : api.status();
}

// Runs plan `pl` (from plan_for, with its handle) on `call`'s pointers (its workspace holds the
// plan's bytes).
Status execute(const CudnnApi* api, cudnnHandle_t handle, const Plan& pl, const AttentionParams& p,
               const CudnnSdpaCall& call) {
  if (!aligned16(call.q) || !aligned16(call.k) || !aligned16(call.v) || !aligned16(call.out))
    return Status::unsupported("q, k, v and out must be 16-byte aligned");
  if (pl.workspace > 0 && !call.workspace) return Status::internal("cuDNN SDPA: no workspace for the plan");
  // One handle per thread and device serves every stream: the stream is set before each call.
  cudnnStatus_t st = api->set_stream(handle, static_cast<cudaStream_t>(call.stream));
  if (st != CUDNN_STATUS_SUCCESS) return api->error(st, "cudnnSetStream");
  auto pack_or = variant_pack(api, pl, p, call);
  if (!pack_or.is_ok()) return pack_or.status();
  st = api->execute(handle, pl.plan, *pack_or);
  if (st != CUDNN_STATUS_SUCCESS) return Status::device_error(api->error(st, "execute").message());
  return Status::ok();
}

}  // namespace

std::string cudnn_sdpa_availability() {
  auto api = cudnn_api();
  if (!api.is_ok()) return api.status().message();
  return fmt::format("cuDNN {} from {}", (*api)->version, (*api)->path);
}

Status cudnn_sdpa_supports(const AttentionParams& p) { return supports(p); }

StatusOr<size_t> cudnn_sdpa_workspace(const AttentionParams& p, bool stats) {
  TUNABLEOP_RETURN_IF_ERROR(supports(p));
  cudnnHandle_t handle = nullptr;
  auto plan = plan_for(*cudnn_api(), p, 0, stats, &handle);
  if (!plan.is_ok()) return plan.status();
  return size_t((*plan)->workspace);
}

Status cudnn_sdpa_run(const AttentionParams& p, const CudnnSdpaCall& call) {
  TUNABLEOP_RETURN_IF_ERROR(supports(p));
  const CudnnApi* api = *cudnn_api();
  cudnnHandle_t handle = nullptr;
  auto plan = plan_for(api, p, 0, call.stats != nullptr, &handle);
  if (!plan.is_ok()) return plan.status();
  return execute(api, handle, **plan, p, call);
}

std::vector<AttentionCandidate> cudnn_sdpa_candidates() {
  std::vector<AttentionCandidate> out;
  for (int slot = 0; slot < kNumSlots; ++slot) {
    AttentionCandidate c;
    c.name = std::string("Attn_Cudnn_Sdpa") + kSlots[slot].suffix;
    c.device = DeviceKind::kCuda;
    c.info = CandidateInfo{"cuDNN", "sdpa", {}};
    if (slot > 0) c.info.add("config", kSlots[slot].suffix + 1);
    auto slot_supports = [slot](const AttentionParams& p) -> Status {
      TUNABLEOP_RETURN_IF_ERROR(supports(p));
      if (slot > 0 && p.q_len < kExtraSlotMinQueries)
        return Status::unsupported(
            fmt::format("cuDNN's other configurations: {} queries or more", kExtraSlotMinQueries));
      return Status::ok();
    };
    c.supports = slot_supports;
    c.workspace_bytes = [slot, slot_supports](const AttentionParams& p) -> size_t {
      if (!slot_supports(p).is_ok()) return 0;
      cudnnHandle_t handle = nullptr;
      auto plan = plan_for(*cudnn_api(), p, slot, false, &handle);
      return plan.is_ok() ? size_t((*plan)->workspace) : 0;
    };
    c.run = [slot, slot_supports](const AttentionParams& p, const AttentionOperands& o) -> Status {
      TUNABLEOP_RETURN_IF_ERROR(slot_supports(p));
      const CudnnApi* api = *cudnn_api();
      cudnnHandle_t handle = nullptr;
      auto plan = plan_for(api, p, slot, false, &handle);
      if (!plan.is_ok()) return plan.status();
      auto ws = operand_workspace(o, size_t((*plan)->workspace));
      if (!ws.is_ok()) return ws.status();
      return execute(api, handle, **plan, p, CudnnSdpaCall{o.q, o.k, o.v, o.out, nullptr, *ws, o.stream});
    };
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tunableop::cuda
