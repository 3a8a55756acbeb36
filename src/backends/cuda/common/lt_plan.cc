#include "backends/cuda/common/lt_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/cuda/common/cublas_gemm.h"
#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/common/lt_search.h"

namespace tunableop::cuda {

std::string lt_name(const LtConfig& c) {
  return fmt::format("{}a{}_t{}_s{}_k{}_r{}_w{}_c{}_i{}_cl{}", kLtPrefix, c.id, c.tile, c.stages, c.split_k,
                     c.reduction, c.swizzle, c.custom, c.inner, c.cluster);
}

CandidateInfo lt_info(const LtConfig& c, std::string algorithm) {
  CandidateInfo info{"cuBLASLt", std::move(algorithm), {}};
  info.add("algo", std::to_string(c.id))
      .add("tile", std::to_string(c.tile))
      .add("stages", std::to_string(c.stages))
      .add("split_k", std::to_string(c.split_k))
      .add("reduction", std::to_string(c.reduction))
      .add("swizzle", std::to_string(c.swizzle))
      .add("custom", std::to_string(c.custom))
      .add("inner", std::to_string(c.inner))
      .add("cluster", std::to_string(c.cluster));
  return info;
}

StatusOr<LtConfig> parse_lt_name(const std::string& name) {
  long long v[9];
  int used = 0;
  int got = std::sscanf(name.c_str(), "Gemm_Lt_a%lld_t%lld_s%lld_k%lld_r%lld_w%lld_c%lld_i%lld_cl%lld%n", &v[0], &v[1],
                        &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &used);
  if (got != 9 || size_t(used) != name.size()) {
    return Status::parse_error(fmt::format("'{}' is not a cuBLASLt solution name (Gemm_Lt_a_t_s_k_r_w_c_i_cl)", name));
  }
  for (int f = 0; f < 9; ++f) {
    // Split-K is a signed count: some epilogue algorithms report -1 (library's choice).
    long long lo = f == 3 ? -1 : 0;
    if (v[f] < lo || v[f] > 0xffffffffll) return Status::parse_error(fmt::format("'{}': field out of range", name));
  }
  LtConfig c;
  c.id = int32_t(v[0]);
  c.tile = uint32_t(v[1]);
  c.stages = uint32_t(v[2]);
  c.split_k = int32_t(v[3]);
  c.reduction = uint32_t(v[4]);
  c.swizzle = uint32_t(v[5]);
  c.custom = uint32_t(v[6]);
  c.inner = uint16_t(v[7]);
  c.cluster = uint16_t(v[8]);
  if (lt_name(c) != name) return Status::parse_error(fmt::format("'{}': non-canonical cuBLASLt name", name));
  return c;
}

namespace {

template <class T>
T config_get(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

uint32_t cap_u32(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr, uint32_t fallback) {
  uint32_t v = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS) return fallback;
  return v;
}

}  // namespace

StatusOr<cublasLtMatrixLayout_t> make_lt_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                                int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  // cuBLASLt rejects ld < 1 even for empty matrices.
  TUNABLEOP_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), std::max<int64_t>(ld, 1)));
  if (batch > 1) {
    int32_t count = int32_t(batch);
    cublasStatus_t s1 = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    cublasStatus_t s2 =
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    if (s1 != CUBLAS_STATUS_SUCCESS || s2 != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(l);
      return cublas_status(s1 != CUBLAS_STATUS_SUCCESS ? s1 : s2, "cublasLtMatrixLayoutSetAttribute(batch)");
    }
  }
  return l;
}

LtConfig read_config(const cublasLtMatmulAlgo_t& algo) {
  LtConfig c;
  c.id = config_get<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
  c.tile = config_get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  c.stages = config_get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  c.split_k = config_get<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  c.reduction = config_get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  c.swizzle = config_get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  c.custom = config_get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  c.inner = config_get<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
  c.cluster = config_get<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return c;
}

LtAlignment algo_alignment(const cublasLtMatmulAlgo_t& algo) {
  LtAlignment a;
  a.a = cap_u32(algo, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, 256);
  a.b = cap_u32(algo, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES, 256);
  a.c = std::max(cap_u32(algo, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, 256),
                 cap_u32(algo, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES, 256));
  return a;
}

StatusOr<std::shared_ptr<LtPlan>> LtPlan::create(const GemmParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(check_blas_shape(p));
  if (p.m == 0 || p.n == 0 || p.k == 0) return Status::unsupported("cuBLASLt needs m, n, k > 0");
  std::shared_ptr<LtPlan> plan(new LtPlan());
  plan->p_ = p;
  CudaTypes t = cuda_types(p);
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulDescCreate(&plan->op_, t.compute, t.scale));
  int32_t ta = p.transa == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
  int32_t tb = p.transb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(plan->op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(plan->op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  auto a = make_lt_layout(t.data, p.a_rows(), p.a_cols(), p.lda, p.batch, p.stride_a);
  if (!a.is_ok()) return a.status();
  plan->a_ = *a;
  auto b = make_lt_layout(t.data, p.b_rows(), p.b_cols(), p.ldb, p.batch, p.stride_b);
  if (!b.is_ok()) return b.status();
  plan->b_ = *b;
  auto c = make_lt_layout(t.out, p.m, p.n, p.ldc, p.batch, p.stride_c);
  if (!c.is_ok()) return c.status();
  plan->c_ = *c;
  return plan;
}

LtPlan::~LtPlan() {
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

bool LtPlan::matches(const GemmParams& q) const {
  const GemmParams& p = p_;
  return p.dtype == q.dtype && p.c_dtype() == q.c_dtype() && p.transa == q.transa && p.transb == q.transb &&
         p.m == q.m && p.n == q.n && p.k == q.k && p.lda == q.lda && p.ldb == q.ldb && p.ldc == q.ldc &&
         p.batch == q.batch &&
         (p.batch == 1 || (p.stride_a == q.stride_a && p.stride_b == q.stride_b && p.stride_c == q.stride_c)) &&
         p.allow_tf32 == q.allow_tf32;
}

Status LtPlan::check_algo(cublasLtHandle_t h, const cublasLtMatmulAlgo_t& algo, size_t* workspace) const {
  return lt_check_algo(h, lt_problem(*this), algo, workspace);
}

StatusOr<cublasLtMatmulAlgo_t> LtPlan::make_algo(cublasLtHandle_t h, const LtConfig& c, size_t* workspace) const {
  return lt_make_algo(h, lt_problem(*this), c, workspace);
}

Status LtPlan::run(cublasLtHandle_t h, const cublasLtMatmulAlgo_t& algo, const GemmParams& p,
                   const GemmOperands& o) const {
  Scalars s = make_scalars(p);
  TUNABLEOP_CUBLAS_TRY(cublasLtMatmul(h, op_, &s.alpha, o.a, a_, o.b, b_, &s.beta, o.c, c_, o.c, c_, &algo, o.workspace,
                                      o.workspace_bytes, static_cast<cudaStream_t>(o.stream)));
  return Status::ok();
}

}  // namespace tunableop::cuda
