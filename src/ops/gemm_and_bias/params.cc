// Validation and problem keys of GemmAndBias (layout in include/tunableop/gemm_and_bias.h).
#include <fmt/format.h>

#include "tunableop/gemm_and_bias.h"

namespace tunableop {

namespace {
constexpr const char* kOpPrefix = "GemmAndBiasTunableOp_";
constexpr const char* kActTag = "_act_";
}  // namespace

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
  }
  return "?";
}

StatusOr<Activation> parse_activation(const std::string& s) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu})
    if (s == activation_name(a) || s == std::to_string(int(a))) return a;
  return Status::invalid_argument(fmt::format("unknown activation '{}' (use none, relu or gelu)", s));
}

Status GemmAndBiasParams::validate() const {
  TUNABLEOP_RETURN_IF_ERROR(gemm.validate());
  if (gemm.batch != 1)
    return Status::invalid_argument(fmt::format("GemmAndBias has no batch (batch must be 1, got {})", gemm.batch));
  if (gemm.beta != 0.0)
    return Status::invalid_argument(fmt::format("GemmAndBias needs beta == 0 (C is not read), got {}", gemm.beta));
  if (gemm.widens())
    return Status::invalid_argument("GemmAndBias writes C in the inputs' dtype (out_dtype must be unset)");
  if (act != Activation::kNone && act != Activation::kRelu && act != Activation::kGelu)
    return Status::invalid_argument(fmt::format("unknown activation {}", int(act)));
  return Status::ok();
}

std::string gemm_and_bias_op_signature(const GemmAndBiasParams& p) {
  const GemmParams& g = p.gemm;
  return fmt::format("{}{}{}_{}{}", kOpPrefix, dtype_torch_name(g.dtype), g.allow_tf32 ? "_tf32" : "", g.transa,
                     g.transb);
}

std::string gemm_and_bias_params_signature(const GemmAndBiasParams& p) {
  return fmt::format("{}{}{}", gemm_params_signature(p.gemm), kActTag, int(p.act));
}

StatusOr<GemmAndBiasParams> parse_gemm_and_bias_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read GemmAndBias problem '{},{}': {}", op, params, why));
  };
  const std::string prefix(kOpPrefix);
  if (op.rfind(prefix, 0) != 0) return bad("op must look like GemmAndBiasTunableOp_<dtype>_<NN|NT|TN|TT>");
  size_t at = params.rfind(kActTag);
  if (at == std::string::npos) return bad("params must end with _act_<0|1|2>");
  const std::string act = params.substr(at + std::string(kActTag).size());
  if (act != "0" && act != "1" && act != "2") return bad("activation must be 0, 1 or 2");
  // The rest is a plain (non-batched) GEMM key: reuse its parser.
  auto g = parse_gemm_signature("GemmTunableOp_" + op.substr(prefix.size()), params.substr(0, at));
  if (!g.is_ok()) return bad(g.status().message());
  GemmAndBiasParams p{*g, Activation(act[0] - '0')};
  Status st = p.validate();
  if (!st.is_ok()) return bad(st.message());
  return p;
}

}  // namespace tunableop
