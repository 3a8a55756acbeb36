// Validation and problem keys of FusedLinear (layout in include/tunableop/fused_linear.h).
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "tunableop/checked_size.h"
#include "tunableop/fused_linear.h"

namespace tunableop {

namespace {
constexpr const char* kOpPrefix = "FusedLinearTunableOp_";
constexpr int64_t kMaxNormBytes = 160 * 1024;  // the normalised input, in shared memory
}  // namespace

Status FusedLinearParams::validate() const {
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return Status::invalid_argument(fmt::format("FusedLinear: fp32 or bf16 only, got {}", dtype_name(dtype)));
  }
  if (tokens < 1 || tokens > kFusedLinearMaxTokens) {
    return Status::invalid_argument(
        fmt::format("FusedLinear: tokens must be 1..{}, got {}", kFusedLinearMaxTokens, tokens));
  }
  const int64_t elem = int64_t(dtype_size(dtype));
  const CheckedInt in_bytes = CheckedInt(in) * elem;
  if (in < 1 || !in_bytes.ok() || in_bytes.value() % 16 != 0) {
    return Status::invalid_argument(fmt::format("FusedLinear: in must be a positive multiple of 16 bytes, got {}", in));
  }
  if (out < 1 || out >= (int64_t(1) << 31)) {
    return Status::invalid_argument(fmt::format("FusedLinear: out must be in 1..2^31-1, got {}", out));
  }
  // Every operand's byte count must fit (the buffers are sized from them): W is out x in, the
  // fp32 input and residual tokens x in and tokens x out.
  if (!(CheckedInt(out) * in * elem).ok() || !(CheckedInt(tokens) * in * 4).ok()) {
    return Status::invalid_argument(
        fmt::format("FusedLinear: W ({} x {}) spans more bytes than a 64-bit size can hold", out, in));
  }
  if (gated() && out % 2 != 0) {
    return Status::invalid_argument(
        fmt::format("FusedLinear: a gated output pairs rows, out must be even, got {}", out));
  }
  if (int(input) < 0 || int(input) > 2 || int(output) < 0 || int(output) > 6) {
    return Status::invalid_argument("FusedLinear: unknown input or output kind");
  }
  if (norm()) {
    if (!(eps > 0)) return Status::invalid_argument(fmt::format("FusedLinear: eps must be > 0, got {}", eps));
    if (tokens * in * elem > kMaxNormBytes) {
      return Status::invalid_argument(
          fmt::format("FusedLinear: the normalised input ({} tokens x {}) exceeds {} KiB of shared memory", tokens, in,
                      kMaxNormBytes / 1024));
    }
  }
  return Status::ok();
}

std::string fused_linear_op_signature(const FusedLinearParams& p) {
  return fmt::format("{}{}", kOpPrefix, dtype_torch_name(p.dtype));
}

std::string fused_linear_params_signature(const FusedLinearParams& p) {
  return fmt::format("out_{}_tokens_{}_in_{}_input_{}_eps_{:g}_output_{}", p.out, p.tokens, p.in, int(p.input),
                     p.norm() ? p.eps : 0.0, int(p.output));
}

StatusOr<FusedLinearParams> parse_fused_linear_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read FusedLinear problem '{},{}': {}", op, params, why));
  };
  const std::string prefix(kOpPrefix);
  if (op.rfind(prefix, 0) != 0) return bad("op must look like FusedLinearTunableOp_<dtype>");
  auto dt = parse_dtype(op.substr(prefix.size()));
  if (!dt.is_ok()) return bad(dt.status().message());
  FusedLinearParams p;
  p.dtype = *dt;
  // Fields in order: each "<name>_<value>", values up to the next '_'.
  const char* s = params.c_str();
  auto field = [&](const char* name, std::string* value) {
    const size_t n = std::strlen(name);
    if (std::strncmp(s, name, n) != 0 || s[n] != '_') return false;
    s += n + 1;
    const char* end = std::strchr(s, '_');
    *value = end ? std::string(s, end) : std::string(s);
    s = end ? end + 1 : s + value->size();
    return !value->empty();
  };
  // Digits only, in int64 (strtoll saturated an out-of-range value to INT64_MAX silently).
  auto integer = [](const std::string& v, int64_t* out) {
    return v.find_first_not_of("0123456789") == std::string::npos && parse_int64(v, out, 0);
  };
  std::string v;
  int64_t input = 0, output = 0;
  if (!field("out", &v) || !integer(v, &p.out)) return bad("expected out_<n>");
  if (!field("tokens", &v) || !integer(v, &p.tokens)) return bad("expected tokens_<n>");
  if (!field("in", &v) || !integer(v, &p.in)) return bad("expected in_<n>");
  if (!field("input", &v) || !integer(v, &input) || input > 2) return bad("expected input_<0|1|2>");
  if (!field("eps", &v)) return bad("expected eps_<value>");
  char* end = nullptr;
  p.eps = std::strtod(v.c_str(), &end);
  if (!end || *end != '\0') return bad("eps is not a number");
  if (!field("output", &v) || !integer(v, &output) || output > 6 || *s != '\0') return bad("expected output_<0..6>");
  p.input = FusedInput(input);
  p.output = FusedOutput(output);
  if (!p.norm()) p.eps = 1e-6;  // not part of a plain input's problem
  Status st = p.validate();
  if (!st.is_ok()) return bad(st.message());
  return p;
}

}  // namespace tunableop
