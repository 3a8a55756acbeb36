#include "backends/cuda/cublaslt/lt_family.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/common/lt_plan.h"

namespace tunableop::cuda {

namespace {

// RAII for a preference descriptor with the workspace limit set.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
  Status init(bool by_algo_id) {
    TUNABLEOP_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kLtMaxWorkspaceBytes;
    TUNABLEOP_CUBLAS_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    if (by_algo_id) {
      uint32_t mode = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
      TUNABLEOP_CUBLAS_TRY(
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof(mode)));
    }
    return Status::ok();
  }
};

std::vector<int> algo_ids(cublasLtHandle_t h, const GemmParams& p) {
  CudaTypes t = cuda_types(p);
  std::vector<int> ids(256);
  int n = 0;
  if (cublasLtMatmulAlgoGetIds(h, t.compute, t.scale, t.data, t.data, t.out, t.out, int(ids.size()), ids.data(), &n) !=
      CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  ids.resize(size_t(n));
  return ids;
}

// The heuristic's list (BEST_FIT), in its own order: most likely winners first.
void heuristic_configs(cublasLtHandle_t h, const LtPlan& plan, int count, std::vector<LtConfig>& out) {
  Preference pref;
  if (!pref.init(false).is_ok()) return;
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(count));
  int n = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, plan.op(), plan.a(), plan.b(), plan.c(), plan.c(), pref.pref, count, res.data(),
                                     &n) != CUBLAS_STATUS_SUCCESS) {
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (res[size_t(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(read_config(res[size_t(i)].algo));
  }
}

// The best configuration of every algorithm id (CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID): the
// results array comes in holding one initialised algorithm per id.
void per_id_configs(cublasLtHandle_t h, const LtPlan& plan, std::vector<LtConfig>& out) {
  CudaTypes t = cuda_types(plan.params());
  std::vector<cublasLtMatmulHeuristicResult_t> res;
  for (int id : algo_ids(h, plan.params())) {
    cublasLtMatmulHeuristicResult_t r{};
    if (cublasLtMatmulAlgoInit(h, t.compute, t.scale, t.data, t.data, t.out, t.out, id, &r.algo) ==
        CUBLAS_STATUS_SUCCESS) {
      res.push_back(r);
    }
  }
  if (res.empty()) return;
  Preference pref;
  if (!pref.init(true).is_ok()) return;
  int n = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, plan.op(), plan.a(), plan.b(), plan.c(), plan.c(), pref.pref, int(res.size()),
                                     res.data(), &n) != CUBLAS_STATUS_SUCCESS) {
    return;
  }
  for (int i = 0; i < n && i < int(res.size()); ++i) {
    if (res[size_t(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(read_config(res[size_t(i)].algo));
  }
}

std::vector<uint32_t> cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0) {
    return {0};  // "undefined": let the library choose
  }
  std::vector<uint32_t> v(bytes / sizeof(uint32_t));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), v.size() * sizeof(uint32_t), &bytes) !=
      CUBLAS_STATUS_SUCCESS) {
    return {0};
  }
  if (v.empty()) v.push_back(0);
  return v;
}

template <class T>
T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &bytes) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

// Exhaustive enumeration (search effort 2). Every (id, tile, stages) base configuration is
// checked with AlgoCheck; only valid bases are varied further (custom option, swizzle, split-K
// x reduction scheme, cluster shape), one dimension at a time: the full cross product runs to
// millions of AlgoCheck calls and the variations rarely combine into a win. Stops at `limit`.
void exhaustive_configs(cublasLtHandle_t h, const LtPlan& plan, size_t limit, std::vector<LtConfig>& out) {
  CudaTypes t = cuda_types(plan.params());
  const int64_t k = plan.params().k;
  auto try_add = [&](const LtConfig& c) {
    if (out.size() >= limit) return false;
    size_t ws = 0;
    if (!plan.make_algo(h, c, &ws).is_ok()) return false;
    out.push_back(c);
    return true;
  };
  for (int id : algo_ids(h, plan.params())) {
    cublasLtMatmulAlgo_t algo{};
    if (cublasLtMatmulAlgoInit(h, t.compute, t.scale, t.data, t.data, t.out, t.out, id, &algo) !=
        CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    std::vector<uint32_t> tiles = cap_list(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = cap_list(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
    bool split_ok = cap_value<int32_t>(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    uint32_t red_mask = cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    bool swizzle_ok = cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0;
    int32_t custom_max = cap_value<int32_t>(algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
    for (uint32_t tile : tiles) {
      for (uint32_t st : stages) {
        if (out.size() >= limit) return;
        LtConfig base;
        base.id = id;
        base.tile = tile;
        base.stages = st;
        if (!try_add(base)) continue;
        for (int32_t c = 1; c <= custom_max; ++c) {
          LtConfig v = base;
          v.custom = uint32_t(c);
          try_add(v);
        }
        if (swizzle_ok) {
          LtConfig v = base;
          v.swizzle = 1;
          try_add(v);
        }
        if (split_ok) {
          for (int32_t s : {2, 3, 4, 8, 16}) {
            if (k < int64_t(s) * 64) break;  // slices thinner than one k-tile only add reduction cost
            for (uint32_t r :
                 {uint32_t(CUBLASLT_REDUCTION_SCHEME_INPLACE), uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                  uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)}) {
              if (!(red_mask & r)) continue;
              LtConfig v = base;
              v.split_k = s;
              v.reduction = r;
              try_add(v);
            }
          }
        }
        for (uint16_t cl = 1; cl < uint16_t(CUBLASLT_CLUSTER_SHAPE_END); ++cl) {
          LtConfig v = base;
          v.cluster = cl;
          try_add(v);
        }
      }
    }
  }
}

GemmCandidate make_candidate(std::shared_ptr<LtPlan> plan, const LtConfig& cfg, const cublasLtMatmulAlgo_t& algo,
                             size_t workspace) {
  GemmCandidate c;
  c.name = lt_name(cfg);
  c.info = lt_info(cfg, "algo");
  c.device = DeviceKind::kCuda;
  c.min_effort = 0;
  LtAlignment align = algo_alignment(algo);
  c.supports = [plan](const GemmParams& p) -> Status {
    if (!plan->matches(p)) return Status::unsupported("cuBLASLt algorithm was configured for another problem");
    return Status::ok();
  };
  c.workspace_bytes = [workspace](const GemmParams&) { return workspace; };
  c.run = [plan, algo, align, workspace](const GemmParams& p, const GemmOperands& o) -> Status {
    if (!plan->matches(p)) return Status::unsupported("cuBLASLt algorithm was configured for another problem");
    auto misaligned = [](const void* ptr, uint32_t need) {
      return need > 1 && (reinterpret_cast<uintptr_t>(ptr) % need) != 0;
    };
    if (misaligned(o.a, align.a) || misaligned(o.b, align.b) || misaligned(o.c, align.c)) {
      return Status::unsupported(fmt::format("pointers not aligned as the algorithm needs (A {}, B {}, C {} bytes)",
                                             align.a, align.b, align.c));
    }
    auto ws = workspace_for(o, workspace);
    if (!ws.is_ok()) return ws.status();
    GemmOperands with_ws = o;
    with_ws.workspace = *ws;
    with_ws.workspace_bytes = *ws == o.workspace ? o.workspace_bytes : workspace;
    auto h = current_handles();
    if (!h.is_ok()) return h.status();
    return plan->run(h->lt, algo, p, with_ws);
  };
  return c;
}

std::vector<GemmCandidate> expand(const GemmParams& p, int effort) {
  std::vector<GemmCandidate> out;
  auto h = current_handles();
  if (!h.is_ok()) return out;
  auto plan = LtPlan::create(p);
  if (!plan.is_ok()) return out;
  std::vector<LtConfig> configs;
  heuristic_configs(h->lt, **plan, effort <= 0 ? kLtHeuristicRequestEffort0 : kLtHeuristicRequest, configs);
  if (effort >= 1) per_id_configs(h->lt, **plan, configs);
  if (effort >= 2) {
    std::vector<LtConfig> more;
    exhaustive_configs(h->lt, **plan, kLtExhaustiveMaxConfigs, more);
    configs.insert(configs.end(), more.begin(), more.end());
  }
  std::set<std::string> seen;
  for (const LtConfig& cfg : configs) {
    std::string name = lt_name(cfg);
    if (!seen.insert(name).second) continue;
    // Time exactly what a later run rebuilds from the name (not the heuristic's own struct),
    // so a stored result always means the same kernel.
    size_t ws = 0;
    auto algo = (*plan)->make_algo(h->lt, cfg, &ws);
    if (!algo.is_ok()) continue;
    out.push_back(make_candidate(*plan, cfg, *algo, ws));
  }
  return out;
}

StatusOr<GemmCandidate> resolve(const GemmParams& p, const std::string& name) {
  auto cfg = parse_lt_name(name);
  if (!cfg.is_ok()) return cfg.status();
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  auto plan = LtPlan::create(p);
  if (!plan.is_ok()) return plan.status();
  size_t ws = 0;
  auto algo = (*plan)->make_algo(h->lt, *cfg, &ws);
  if (!algo.is_ok()) {
    return Status::unsupported(fmt::format("{} no longer validates here: {}", name, algo.status().message()));
  }
  return make_candidate(*plan, *cfg, *algo, ws);
}

}  // namespace

GemmCandidateFamily make_lt_family() {
  GemmCandidateFamily f;
  f.prefix = kLtPrefix;
  f.device = DeviceKind::kCuda;
  f.min_effort = 0;
  f.expand = expand;
  f.resolve = resolve;
  return f;
}

}  // namespace tunableop::cuda
