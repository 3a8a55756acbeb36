#include "backends/cuda/common/lt_search.h"

#include <fmt/format.h>

#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

template <class T>
Status config_set(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulAlgoConfigSetAttribute(algo, attr, &v, sizeof(v)));
  return Status::ok();
}

std::vector<int> algo_ids(cublasLtHandle_t h, const LtProblem& p) {
  std::vector<int> ids(256);
  int n = 0;
  if (cublasLtMatmulAlgoGetIds(h, p.compute, p.scale, p.a_type, p.b_type, p.c_type, p.d_type, int(ids.size()),
                               ids.data(), &n) != CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  ids.resize(size_t(n));
  return ids;
}

bool algo_init(cublasLtHandle_t h, const LtProblem& p, int id, cublasLtMatmulAlgo_t* algo) {
  return cublasLtMatmulAlgoInit(h, p.compute, p.scale, p.a_type, p.b_type, p.c_type, p.d_type, id, algo) ==
         CUBLAS_STATUS_SUCCESS;
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

}  // namespace

LtProblem lt_problem(const LtPlan& plan) {
  const CudaTypes t = cuda_types(plan.params());
  LtProblem p;
  p.op = plan.op();
  p.a = plan.a(), p.b = plan.b(), p.c = plan.c(), p.d = plan.c();
  p.compute = t.compute, p.scale = t.scale;
  p.a_type = p.b_type = t.data;
  p.c_type = p.d_type = t.out;
  p.k = plan.params().k;
  return p;
}

LtPreference::~LtPreference() {
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
}

Status LtPreference::init(bool by_algo_id, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = kLtMaxWorkspaceBytes;
  TUNABLEOP_CUBLAS_TRY(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  if (by_algo_id) {
    uint32_t mode = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
    TUNABLEOP_CUBLAS_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode, sizeof(mode)));
  }
  for (auto [attr, v] : {std::pair{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
                         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
                         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
                         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}}) {
    if (v) TUNABLEOP_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)));
  }
  return Status::ok();
}

uint32_t lt_alignment_of(const void* p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 1;
  while (a < 256 && (v % (2 * a)) == 0) a *= 2;
  return a;
}

Status lt_check_algo(cublasLtHandle_t h, const LtProblem& p, const cublasLtMatmulAlgo_t& algo, size_t* workspace) {
  cublasLtMatmulHeuristicResult_t res{};
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulAlgoCheck(h, p.op, p.a, p.b, p.c, p.d, &algo, &res));
  if (res.state != CUBLAS_STATUS_SUCCESS) return cublas_status(res.state, "cublasLtMatmulAlgoCheck");
  if (res.workspaceSize > kLtMaxWorkspaceBytes) {
    return Status::unsupported(
        fmt::format("needs {} bytes of workspace (limit {})", res.workspaceSize, kLtMaxWorkspaceBytes));
  }
  if (workspace) *workspace = res.workspaceSize;
  return Status::ok();
}

StatusOr<cublasLtMatmulAlgo_t> lt_make_algo(cublasLtHandle_t h, const LtProblem& p, const LtConfig& c,
                                            size_t* workspace) {
  cublasLtMatmulAlgo_t algo{};
  TUNABLEOP_CUBLAS_TRY(
      cublasLtMatmulAlgoInit(h, p.compute, p.scale, p.a_type, p.b_type, p.c_type, p.d_type, c.id, &algo));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.split_k));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reduction));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.custom));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.inner));
  TUNABLEOP_RETURN_IF_ERROR(config_set(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster));
  TUNABLEOP_RETURN_IF_ERROR(lt_check_algo(h, p, algo, workspace));
  return algo;
}

void lt_heuristic_configs(cublasLtHandle_t h, const LtProblem& p, int count, std::vector<LtConfig>& out) {
  LtPreference pref;
  if (!pref.init().is_ok()) return;
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(count));
  int n = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, p.op, p.a, p.b, p.c, p.d, pref.pref, count, res.data(), &n) !=
      CUBLAS_STATUS_SUCCESS) {
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (res[size_t(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(read_config(res[size_t(i)].algo));
  }
}

// CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID: the results array comes in holding one initialised
// algorithm per id, and goes out holding each id's best configuration.
void lt_per_id_configs(cublasLtHandle_t h, const LtProblem& p, std::vector<LtConfig>& out) {
  std::vector<cublasLtMatmulHeuristicResult_t> res;
  for (int id : algo_ids(h, p)) {
    cublasLtMatmulHeuristicResult_t r{};
    if (algo_init(h, p, id, &r.algo)) res.push_back(r);
  }
  if (res.empty()) return;
  LtPreference pref;
  if (!pref.init(true).is_ok()) return;
  int n = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, p.op, p.a, p.b, p.c, p.d, pref.pref, int(res.size()), res.data(), &n) !=
      CUBLAS_STATUS_SUCCESS) {
    return;
  }
  for (int i = 0; i < n && i < int(res.size()); ++i) {
    if (res[size_t(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(read_config(res[size_t(i)].algo));
  }
}

// Every (id, tile, stages) base configuration is checked with AlgoCheck; only valid bases are
// varied further, one dimension at a time: the full cross product runs to millions of AlgoCheck
// calls and the variations rarely combine into a win.
void lt_exhaustive_configs(cublasLtHandle_t h, const LtProblem& p, size_t limit, std::vector<LtConfig>& out) {
  auto try_add = [&](const LtConfig& c) {
    if (out.size() >= limit) return false;
    size_t ws = 0;
    if (!lt_make_algo(h, p, c, &ws).is_ok()) return false;
    out.push_back(c);
    return true;
  };
  for (int id : algo_ids(h, p)) {
    cublasLtMatmulAlgo_t algo{};
    if (!algo_init(h, p, id, &algo)) continue;
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
            if (p.k < int64_t(s) * 64) break;  // slices thinner than one k-tile only add reduction cost
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

}  // namespace tunableop::cuda
