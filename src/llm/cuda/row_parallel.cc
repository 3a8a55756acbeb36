#include "llm/cuda/row_parallel.h"

#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "cuda_common/cuda_check.h"

namespace tunableop::llm::cuda {
namespace {

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::device_error(std::string(what) + ": " + cublasGetStatusString(s));
}

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

}  // namespace

std::pair<const void*, int64_t> next_weights(const DeviceWeights& weights, const ModelConfig& c, const void* w,
                                             int64_t lm_head_rows, size_t esize, int64_t cap) {
  const auto& layers = weights.layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    int64_t rows = 0;
    const void* next = nullptr;
    if (layers[l].wo == w) {
      next = layers[l].w_gate_up, rows = 2 * c.intermediate_size;
    } else if (layers[l].w_down == w) {
      const bool last = l + 1 == layers.size();
      next = last ? weights.lm_head : layers[l + 1].wqkv;
      rows = last ? lm_head_rows : c.qkv_dim();
    }
    if (next) return {next, std::min(rows * c.hidden_size * int64_t(esize), cap)};
  }
  return {nullptr, 0};
}

RowParallelGemm::~RowParallelGemm() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

Status RowParallelGemm::init(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  TUNABLEOP_RETURN_IF_ERROR(cublas_status(cublasCreate(&h), "cublasCreate"));
  handle_ = h;
  TUNABLEOP_RETURN_IF_ERROR(cublas_status(cublasSetStream(h, stream), "cublasSetStream"));
  // A workspace of our own: cuBLAS then allocates nothing while a graph is being captured.
  TUNABLEOP_RETURN_IF_ERROR(workspace_.ensure(kWorkspaceBytes));
  TUNABLEOP_RETURN_IF_ERROR(
      cublas_status(cublasSetWorkspace(h, workspace_.get(), kWorkspaceBytes), "cublasSetWorkspace"));
  return cublas_status(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");  // no TF32
}

Status RowParallelGemm::run(DType dtype, int64_t rows, int64_t in, int64_t out, const void* x, const void* w,
                            float* y) {
  if (!handle_) return Status::internal("row-parallel GEMM used before init");
  if (dtype != DType::kBF16 && dtype != DType::kF32)
    return Status::invalid_argument("row-parallel GEMM: bf16 or fp32 inputs");
  if (rows <= 0 || in <= 0 || out <= 0) return Status::ok();
  const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.f, beta = 0.f;
  // Column-major: y^T [out, rows] = W^T' [out, in] x^T [in, rows] (W and x row-major).
  return cublas_status(cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(rows),
                                    int(in), &alpha, w, t, int(in), x, t, int(in), &beta, y, CUDA_R_32F, int(out),
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx (row-parallel projection, fp32 output)");
}

StatusOr<float*> RowParallelGemm::partial_sums(Context& ctx, const Projection& p, DType dtype, int64_t max_batch,
                                               const FusedLinearParams* fused, FusedLinearOperands fo,
                                               std::string* kernel) {
  const bool decode = p.phase == Phase::kDecode;
  ::tunableop::cuda::DeviceBuffer& partial = decode ? decode_partial_ : prefill_partial_;
  const size_t bytes = size_t(std::max<int64_t>(p.rows, decode ? max_batch : 1)) * size_t(p.out) * sizeof(float);
  if (partial.bytes() < bytes) TUNABLEOP_RETURN_IF_ERROR(partial.ensure(bytes));
  const std::string site =
      std::string(p.name) + " " + fused_linear_params_signature(fused ? *fused : FusedLinearParams{});
  auto it = plans_.find(site);
  if (fused && it == plans_.end() && !unfused_.count(site)) {
    auto plan = make_plan(ctx, *fused);  // none for shapes the kernel does not take: cuBLAS then
    if (plan.is_ok()) {
      it = plans_.emplace(site, std::move(plan.value())).first;
    } else {
      unfused_.insert(site);
    }
  }
  if (fused && it != plans_.end()) {
    fo.y = partial.get();
    fo.residual = nullptr;
    TUNABLEOP_RETURN_IF_ERROR(it->second.run(fo));
    *kernel = "fused_f32:" + it->second.solution();
  } else {
    TUNABLEOP_RETURN_IF_ERROR(run(dtype, p.rows, p.in, p.out, p.input, p.w, partial.as<float>()));
    *kernel = "gemm_f32";
  }
  return partial.as<float>();
}

}  // namespace tunableop::llm::cuda
