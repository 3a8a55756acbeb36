#include "backends/cuda/scaled_gemm/lt_fp8.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "backends/cuda/common/cuda_util.h"
#include "ops/scaled_gemm/definition.h"

namespace tunableop::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF8E4M3: return CUDA_R_8F_E4M3;
    case DType::kF8E5M2: return CUDA_R_8F_E5M2;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// What a matmul descriptor holds besides the pointers.
struct DescConfig {
  char transa, transb;
  ScaleMode mode;
  bool fast;
  int bias_type;  // cudaDataType_t, -1 without a bias
  bool operator==(const DescConfig&) const = default;
};

DescConfig desc_config(const ScaledGemmParams& p, bool fast) {
  return {p.transa, p.transb, p.scale_mode, fast, p.bias_dtype ? int(cuda_type(*p.bias_dtype)) : -1};
}

struct Fp8Desc {
  cublasLtMatmulDesc_t d = nullptr;
  Fp8Desc() = default;
  Fp8Desc(const Fp8Desc&) = delete;
  Fp8Desc& operator=(const Fp8Desc&) = delete;
  ~Fp8Desc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
  template <class T>
  Status set(cublasLtMatmulDescAttributes_t attr, T v) {
    TUNABLEOP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
    return Status::ok();
  }
  Status init(const DescConfig& c, const void* scale_a, const void* scale_b, const void* bias) {
    TUNABLEOP_CUBLAS_TRY(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(c.transa == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T)));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(c.transb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T)));
    const int32_t mode = c.mode == ScaleMode::kRowwise ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                       : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_a));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_b));
    TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(c.fast ? 1 : 0)));
    if (c.bias_type >= 0) {
      TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS)));
      TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
      TUNABLEOP_RETURN_IF_ERROR(set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(c.bias_type)));
    }
    return Status::ok();
  }
};

// The descriptor for a call: one per thread, configuration and pointer set, kept for the
// thread's life (emptied past kMaxKeptDescriptors: a program that allocates fresh scales on
// every call). Thread-local keeps the candidates thread-safe without a lock.
constexpr size_t kMaxKeptDescriptors = 512;

StatusOr<cublasLtMatmulDesc_t> kept_desc(const DescConfig& c, const void* scale_a, const void* scale_b,
                                         const void* bias) {
  struct Key {
    DescConfig c;
    const void *sa, *sb, *bias;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h = std::hash<const void*>()(k.sa);
      for (size_t v : {size_t(k.sb), size_t(k.bias), size_t(k.c.transa), size_t(k.c.transb), size_t(k.c.mode),
                       size_t(k.c.fast), size_t(k.c.bias_type + 1)})
        h = h * 1000003u ^ v;
      return h;
    }
  };
  thread_local std::unordered_map<Key, std::unique_ptr<Fp8Desc>, KeyHash> kept;
  const Key key{c, scale_a, scale_b, c.bias_type >= 0 ? bias : nullptr};
  if (auto it = kept.find(key); it != kept.end()) return it->second->d;
  if (kept.size() >= kMaxKeptDescriptors) kept.clear();
  auto fresh = std::make_unique<Fp8Desc>();
  TUNABLEOP_RETURN_IF_ERROR(fresh->init(c, scale_a, scale_b, key.bias));
  return kept.emplace(key, std::move(fresh)).first->second->d;
}

// A device address for the search descriptors' scale and bias pointers: never read (the
// heuristic and AlgoCheck look at types and layouts), but a real allocation of this device.
StatusOr<const void*> dummy_device_pointer() {
  static std::mutex mu;
  static std::map<int, void*> by_device;  // process lifetime: 256 bytes per device
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  void*& p = by_device[dev];
  if (!p) TUNABLEOP_CUDA_TRY(cudaMalloc(&p, 256));
  return static_cast<const void*>(p);
}

}  // namespace

Status lt_fp8_applies(const ScaledGemmParams& p) {
  if (p.transa != 'T' || p.transb != 'N') return Status::unsupported("cuBLASLt FP8: TN only (A transposed, B not)");
  if (p.a_dtype == DType::kF8E5M2 && p.b_dtype == DType::kF8E5M2)
    return Status::unsupported("cuBLASLt FP8: e5m2 x e5m2 is not offered");
  if (p.lda % 16 != 0 || p.ldb % 16 != 0)
    return Status::unsupported("cuBLASLt FP8: lda and ldb must be multiples of 16 elements");
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.ldc > INT32_MAX)
    return Status::unsupported("cuBLASLt FP8: sizes must fit 32 bits");
  return Status::ok();
}

StatusOr<std::shared_ptr<Fp8LtPlan>> Fp8LtPlan::create(const ScaledGemmParams& p, bool fast_accum) {
  TUNABLEOP_RETURN_IF_ERROR(lt_fp8_applies(p));
  auto dummy = dummy_device_pointer();
  if (!dummy.is_ok()) return dummy.status();
  std::shared_ptr<Fp8LtPlan> plan(new Fp8LtPlan());
  plan->p_ = p;
  plan->fast_ = fast_accum;
  LtProblem& q = plan->problem_;  // the plan owns every descriptor here (its destructor frees them)
  q.compute = CUBLAS_COMPUTE_32F;
  q.scale = CUDA_R_32F;
  q.a_type = cuda_type(p.a_dtype), q.b_type = cuda_type(p.b_dtype);
  q.d_type = cuda_type(p.out_dtype);
  q.c_type = p.bias_dtype ? cuda_type(*p.bias_dtype) : q.d_type;
  q.k = p.k;
  auto layout = [](cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, cublasLtMatrixLayout_t* l) -> Status {
    auto made = make_lt_layout(t, rows, cols, ld);
    if (!made.is_ok()) return made.status();
    *l = *made;
    return Status::ok();
  };
  TUNABLEOP_RETURN_IF_ERROR(layout(q.a_type, p.a_rows(), p.a_cols(), p.lda, &q.a));
  TUNABLEOP_RETURN_IF_ERROR(layout(q.b_type, p.b_rows(), p.b_cols(), p.ldb, &q.b));
  TUNABLEOP_RETURN_IF_ERROR(layout(q.c_type, p.m, p.n, p.ldc, &q.c));
  TUNABLEOP_RETURN_IF_ERROR(layout(q.d_type, p.m, p.n, p.ldc, &q.d));
  Fp8Desc search;
  TUNABLEOP_RETURN_IF_ERROR(search.init(desc_config(p, fast_accum), *dummy, *dummy, *dummy));
  std::swap(q.op, search.d);
  return plan;
}

Fp8LtPlan::~Fp8LtPlan() {
  for (cublasLtMatrixLayout_t l : {problem_.a, problem_.b, problem_.c, problem_.d})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (problem_.op) cublasLtMatmulDescDestroy(problem_.op);
}

bool Fp8LtPlan::matches(const ScaledGemmParams& q) const {
  using Def = ops::OpDefinition<ScaledGemmOp>;
  return Def::key(p_) == Def::key(q);
}

Status Fp8LtPlan::run(const cublasLtMatmulAlgo_t& algo, size_t workspace, const ScaledGemmOperands& o) const {
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  auto desc = kept_desc(desc_config(p_, fast_), o.scale_a, o.scale_b, o.bias);
  if (!desc.is_ok()) return desc.status();
  auto ws = workspace_for(GemmOperands{o.a, o.b, o.c, o.stream, o.workspace, o.workspace_bytes}, workspace);
  if (!ws.is_ok()) return ws.status();
  const float alpha = 1.0f, beta = 0.0f;
  // C is never read (beta 0); like PyTorch, its pointer is A's rather than D's or null.
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmul(h->lt, *desc, &alpha, o.a, problem_.a, o.b, problem_.b, &beta, o.a, problem_.c,
                                      o.c, problem_.d, &algo, *ws, workspace, static_cast<cudaStream_t>(o.stream)));
  return Status::ok();
}

StatusOr<Fp8HeuristicChoice> fp8_heuristic_first(const Fp8LtPlan& plan, const ScaledGemmOperands& o) {
  using Def = ops::OpDefinition<ScaledGemmOp>;
  const uint32_t align_a = lt_alignment_of(o.a), align_b = lt_alignment_of(o.b);
  const uint32_t align_c = std::min(align_a, lt_alignment_of(o.c));  // C's pointer is A's
  ops::ProblemKey key = Def::key(plan.params());
  key.add(plan.fast_accum()).add(align_a).add(align_b).add(align_c);
  struct KeyHash {
    size_t operator()(const ops::ProblemKey& k) const { return size_t(k.hash()); }
  };
  thread_local std::unordered_map<ops::ProblemKey, std::optional<Fp8HeuristicChoice>, KeyHash> cache;
  if (auto it = cache.find(key); it != cache.end()) {
    if (!it->second) return Status::unsupported("cuBLASLt's heuristic offers no FP8 algorithm for this problem");
    return *it->second;
  }
  if (cache.size() >= kMaxKeptDescriptors) cache.clear();
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  LtPreference pref;
  TUNABLEOP_RETURN_IF_ERROR(pref.init(false, align_a, align_b, align_c));
  const LtProblem& q = plan.problem();
  cublasLtMatmulHeuristicResult_t r{};
  int n = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h->lt, q.op, q.a, q.b, q.c, q.d, pref.pref, 1, &r, &n);
  std::optional<Fp8HeuristicChoice> choice;
  if (st == CUBLAS_STATUS_SUCCESS && n > 0 && r.state == CUBLAS_STATUS_SUCCESS &&
      r.workspaceSize <= kLtMaxWorkspaceBytes)
    choice = Fp8HeuristicChoice{r.algo, r.workspaceSize};
  cache.emplace(key, choice);
  if (!choice) return Status::unsupported("cuBLASLt's heuristic offers no FP8 algorithm for this problem");
  return *choice;
}

StatusOr<std::shared_ptr<Fp8LtPlan>> kept_fp8_plan(const ScaledGemmParams& p, bool fast_accum) {
  using Def = ops::OpDefinition<ScaledGemmOp>;
  struct KeyHash {
    size_t operator()(const ops::ProblemKey& k) const { return size_t(k.hash()); }
  };
  thread_local std::unordered_map<ops::ProblemKey, std::shared_ptr<Fp8LtPlan>, KeyHash> plans;
  ops::ProblemKey key = Def::key(p);
  key.add(fast_accum);
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  key.add(dev);  // descriptors and layouts are per device
  if (auto it = plans.find(key); it != plans.end()) return it->second;
  auto plan = Fp8LtPlan::create(p, fast_accum);
  if (!plan.is_ok()) return plan.status();
  if (plans.size() >= kMaxKeptDescriptors) plans.clear();
  plans.emplace(key, *plan);
  return *plan;
}

}  // namespace tunableop::cuda
