#include "llm/cuda/fp8_projection.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "cuda_common/cuda_check.h"
#include "llm/cuda/fp8_kernels.h"

namespace tunableop::llm::cuda {

using ::tunableop::cuda::DeviceBuffer;

Status Fp8Projections::ensure(int64_t rows, int64_t width, cudaStream_t s) {
  const size_t q_bytes = size_t(rows * width), s_bytes = size_t(rows) * sizeof(float);
  if (q_.bytes() >= q_bytes && scales_.bytes() >= s_bytes) return Status::ok();
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(s, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)  // every shape runs eagerly before it is captured
    return Status::internal("fp8 projections: activation buffer too small while capturing a CUDA graph");
  for (DeviceBuffer* b : {&q_, &scales_}) {
    if (b->bytes()) retired_.push_back(std::move(*b));
    *b = DeviceBuffer();
  }
  TUNABLEOP_RETURN_IF_ERROR(q_.ensure(std::max<size_t>(q_bytes, 16)));
  TUNABLEOP_RETURN_IF_ERROR(scales_.ensure(std::max<size_t>(s_bytes, 16)));
  return Status::ok();
}

Status Fp8Projections::project(const Projection& p, LinearOp& linear, const float* w_scales, DeviceKernels& dev, Elem e,
                               cudaStream_t s, bool pdl) {
  using Epilogue = Projection::Epilogue;
  const ModelConfig& c = dev.config();
  if (p.row_parallel && dev.tensor_parallel().world > 1)
    return Status::unsupported("--dtype fp8 with tensor parallelism (--tp > 1)");
  const int64_t width = p.epilogue == Epilogue::kGated ? std::max(p.in, p.out / 2) : p.in;
  TUNABLEOP_RETURN_IF_ERROR(ensure(p.rows, width, s));
  uint8_t* q = q_.as<uint8_t>();
  float* x_scales = scales_.as<float>();
  // The input, e4m3 with a scale per token.
  if (pending_.gated) {
    const bool theirs = !p.norm && p.input == pending_.gated && p.rows == pending_.rows;
    pending_ = {};  // read now, or dropped with the error (the next pass starts clean)
    if (!theirs)
      return Status::internal(std::string("fp8 projection ") + p.name +
                              ": the gated activation left in e4m3 is not this projection's input");
  } else if (p.norm) {
    TUNABLEOP_CUDA_TRY(
        rmsnorm_fp8(e, p.x, p.norm, p.rows, p.in, float(c.rms_norm_eps), c.norm_adds_one(), q, x_scales, s, pdl));
    dev.mark(p.name, "norm_fp8", p.rows * p.in * 5);
  } else {
    if (!p.input) return Status::invalid_argument(std::string("fp8 projection ") + p.name + " without an input");
    TUNABLEOP_CUDA_TRY(quantize_rows_fp8(e, false, p.input, p.rows, p.in, q, x_scales, s, pdl));
    dev.mark(p.name, "quantize", p.rows * p.in * 3);
  }
  if (!p.y) return Status::invalid_argument(std::string("fp8 projection ") + p.name + " without an output");
  TUNABLEOP_RETURN_IF_ERROR(linear.scaled(p.phase, p.rows, p.in, p.out, q, x_scales, p.w, w_scales, p.y, s));
  dev.mark(p.name, "scaled_gemm", p.weight_bytes(1) + p.out * 4, true, p.flops());
  switch (p.epilogue) {
    case Epilogue::kStore: return Status::ok();
    case Epilogue::kAddResidual:
      if (!p.residual || p.out != c.hidden_size)
        return Status::invalid_argument(std::string("fp8 projection ") + p.name + ": residual add of the wrong width");
      TUNABLEOP_CUDA_TRY(add_residual(e, p.residual, p.y, p.rows * p.out, s, pdl));
      if (p.next_norm) {
        TUNABLEOP_CUDA_TRY(rmsnorm(e, p.residual, p.next_norm, p.rows, p.out, float(c.rms_norm_eps), c.norm_adds_one(),
                                   p.next_normed, s, pdl));
      }
      dev.mark(p.name, "residual");
      return Status::ok();
    case Epilogue::kGated: {
      if (p.out % 2 || !p.gated)
        return Status::invalid_argument(std::string("fp8 projection ") + p.name + ": gated output of an odd width");
      const Act act = c.activation == Activation::kSilu       ? Act::kSilu
                      : c.activation == Activation::kGeluTanh ? Act::kGeluTanh
                                                              : Act::kGeluErf;
      TUNABLEOP_CUDA_TRY(gated_activation_fp8(e, p.y, p.rows, p.out / 2, act, q, x_scales, s, pdl));
      pending_ = {p.gated, p.rows};
      dev.mark(p.name, "act_fp8", p.rows * p.out * 2);
      return Status::ok();
    }
    case Epilogue::kArgmax:
      if (!p.ids) return Status::invalid_argument(std::string("fp8 projection ") + p.name + " without ids");
      TUNABLEOP_CUDA_TRY(argmax_rows(e, p.y, p.rows, p.out, p.ids, s, pdl));
      dev.mark(p.name, "argmax");
      return Status::ok();
  }
  return Status::invalid_argument("fp8 projection: unknown epilogue");
}

}  // namespace tunableop::llm::cuda
