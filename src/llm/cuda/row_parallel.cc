#include "llm/cuda/row_parallel.h"

#include <algorithm>
#include <string>

#include "tunableop/gemm.h"

namespace tunableop::llm::cuda {

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

Status RowParallelGemm::init(cudaStream_t stream) {
  stream_ = stream;
  return Status::ok();
}

Status RowParallelGemm::run(Context& ctx, DType dtype, int64_t rows, int64_t in, int64_t out, const void* x,
                            const void* w, float* y) {
  if (dtype != DType::kBF16 && dtype != DType::kF32)
    return Status::invalid_argument("row-parallel GEMM: bf16 or fp32 inputs");
  if (rows <= 0 || in <= 0 || out <= 0) return Status::ok();
  // Column-major: y^T [out, rows] = W^T' [out, in] x^T [in, rows] (W and x row-major), C in fp32.
  GemmParams p = linear_params(dtype, rows, in, out);
  p.out_dtype = DType::kF32;
  return gemm(ctx, p, GemmOperands{w, x, y, stream_});
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
    TUNABLEOP_RETURN_IF_ERROR(run(ctx, dtype, p.rows, p.in, p.out, p.input, p.w, partial.as<float>()));
    *kernel = "gemm_f32";
  }
  return partial.as<float>();
}

}  // namespace tunableop::llm::cuda
