#include "llm/engine_dtype.h"

#include <fmt/format.h>

namespace tunableop::llm {

Status apply_engine_dtype(const EngineDtypeRequest& r, EngineOptions* o) {
  const bool fp8 = r.dtype == "fp8" || r.dtype == "fp8-all";
  if (!fp8) {
    if (r.dtype != "bf16" && r.dtype != "fp32")
      return Status::invalid_argument(
          fmt::format("--dtype {}: expected one of bf16, fp32, fp8, fp8-all", r.dtype.empty() ? "''" : r.dtype));
    if (r.cuda) o->dtype = r.dtype == "bf16" ? DType::kBF16 : DType::kF32;  // the CPU computes in fp32
    o->fp8 = {};
    return Status::ok();
  }
  if (!r.cuda)
    return Status::invalid_argument(fmt::format(
        "--dtype {}: the CPU engine computes in fp32 and has no fp8 GEMMs; fp8 weights need --device cuda", r.dtype));
  if (r.tp > 1)
    return Status::invalid_argument(
        fmt::format("--dtype {} with --tp {}: fp8 weights run on one GPU (tensor-parallel shards are not quantized)",
                    r.dtype, r.tp));
  if (r.save_model)
    return Status::invalid_argument(fmt::format(
        "--dtype {} with --save-model: the fp8 weights exist on the GPU only; save the model without --dtype fp8",
        r.dtype));
  o->dtype = DType::kBF16;  // everything but the projections
  o->fp8.projections = true;
  o->fp8.lm_head = r.dtype == "fp8-all";
  return Status::ok();
}

Status refuse_fp8(const EngineOptions& o, const char* engine) {
  if (!o.fp8.any()) return Status::ok();
  return Status::invalid_argument(
      fmt::format("--dtype fp8: {} has no fp8 path (the one-GPU CUDA engine has: --device cuda)", engine));
}

}  // namespace tunableop::llm
