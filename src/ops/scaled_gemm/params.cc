// Validation and problem keys of ScaledGemm (layout in include/ops/tunableop/scaled_gemm.h).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "ops/gemm/operand_span.h"
#include "tunableop/checked_size.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {

namespace {

bool is_output_type(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

// c10's ScalarType names, which PyTorch writes for the bias ("Float", not the op name's "float").
const char* bias_name(DType t) { return t == DType::kF32 ? "Float" : dtype_torch_name(t); }

// Reads `name` at the front of `s` (one of `names`), leaving the rest after one '_'.
template <size_t N>
bool take_name(std::string_view& s, const std::array<DType, N>& names, const char* (*spell)(DType), DType* out) {
  for (DType t : names) {
    const std::string_view n = spell(t);
    if (s.size() > n.size() && s.substr(0, n.size()) == n && s[n.size()] == '_') {
      *out = t;
      s.remove_prefix(n.size() + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

const char* scale_mode_name(ScaleMode s) { return s == ScaleMode::kRowwise ? "rowwise" : "tensorwise"; }

ScaledGemmParams ScaledGemmParams::with_defaults() const {
  ScaledGemmParams p = *this;
  p.transa = char(std::toupper(static_cast<unsigned char>(p.transa)));
  p.transb = char(std::toupper(static_cast<unsigned char>(p.transb)));
  if (p.lda == 0) p.lda = std::max<int64_t>(1, p.a_rows());
  if (p.ldb == 0) p.ldb = std::max<int64_t>(1, p.b_rows());
  if (p.ldc == 0) p.ldc = std::max<int64_t>(1, p.m);
  return p;
}

Status ScaledGemmParams::validate() const {
  if (!is_fp8(a_dtype) || !is_fp8(b_dtype))
    return Status::invalid_argument(fmt::format("ScaledGemm's A and B are fp8 (fp8_e4m3 or fp8_e5m2), got {} and {}",
                                                dtype_name(a_dtype), dtype_name(b_dtype)));
  if (!is_output_type(out_dtype))
    return Status::invalid_argument(
        fmt::format("ScaledGemm's output is bf16, fp16 or fp32, got {}", dtype_name(out_dtype)));
  if (bias_dtype && !is_output_type(*bias_dtype))
    return Status::invalid_argument(
        fmt::format("ScaledGemm's bias is bf16, fp16 or fp32, got {}", dtype_name(*bias_dtype)));
  if (scale_mode != ScaleMode::kTensorwise && scale_mode != ScaleMode::kRowwise)
    return Status::invalid_argument(fmt::format("unknown scale mode {} (0 tensorwise, 1 rowwise)", int(scale_mode)));
  if (transa != 'N' && transa != 'T')
    return Status::invalid_argument(fmt::format("transa must be 'N' or 'T', got '{}'", transa));
  if (transb != 'N' && transb != 'T')
    return Status::invalid_argument(fmt::format("transb must be 'N' or 'T', got '{}'", transb));
  if (m < 0 || n < 0 || k < 1)
    return Status::invalid_argument(fmt::format("ScaledGemm needs m, n >= 0 and k >= 1, got {}, {}, {}", m, n, k));
  if (lda < std::max<int64_t>(1, a_rows()))
    return Status::invalid_argument(fmt::format("lda ({}) must be >= the rows of A as stored ({})", lda, a_rows()));
  if (ldb < std::max<int64_t>(1, b_rows()))
    return Status::invalid_argument(fmt::format("ldb ({}) must be >= the rows of B as stored ({})", ldb, b_rows()));
  if (ldc < std::max<int64_t>(1, m)) return Status::invalid_argument(fmt::format("ldc ({}) must be >= m ({})", ldc, m));
  TUNABLEOP_RETURN_IF_ERROR(ops::check_operand_size("A", a_dtype, 1, 0, lda, a_rows(), a_cols()));
  TUNABLEOP_RETURN_IF_ERROR(ops::check_operand_size("B", b_dtype, 1, 0, ldb, b_rows(), b_cols()));
  TUNABLEOP_RETURN_IF_ERROR(ops::check_operand_size("C", out_dtype, 1, 0, ldc, m, n));
  return Status::ok();
}

int64_t ScaledGemmParams::a_span() const { return ops::operand_span(1, 0, lda, a_rows(), a_cols()); }
int64_t ScaledGemmParams::b_span() const { return ops::operand_span(1, 0, ldb, b_rows(), b_cols()); }
int64_t ScaledGemmParams::c_span() const { return ops::operand_span(1, 0, ldc, m, n); }

std::string scaled_gemm_op_signature(const ScaledGemmParams& p) {
  return fmt::format("{}{}_{}_{}_{}{}", kScaledGemmOpPrefix, dtype_torch_name(p.a_dtype), dtype_torch_name(p.b_dtype),
                     dtype_torch_name(p.out_dtype), p.transa, p.transb);
}

std::string scaled_gemm_params_signature(const ScaledGemmParams& p) {
  return fmt::format("{}{}_{}_{}_{}_ld_{}_{}_{}_rw_{}_bias_{}", char(p.transa | 0x20), char(p.transb | 0x20), p.m, p.n,
                     p.k, p.lda, p.ldb, p.ldc, int(p.scale_mode), p.bias_dtype ? bias_name(*p.bias_dtype) : "None");
}

StatusOr<ScaledGemmParams> parse_scaled_gemm_signature(const std::string& op, const std::string& params) {
  auto bad = [&](const std::string& why) {
    return Status::parse_error(fmt::format("cannot read ScaledGemm problem '{},{}': {}", op, params, why));
  };
  ScaledGemmParams p;
  std::string_view rest(op);
  const std::string_view prefix(kScaledGemmOpPrefix);
  if (rest.substr(0, prefix.size()) != prefix) return bad("op must start with ScaledGemmTunableOp_");
  rest.remove_prefix(prefix.size());
  constexpr std::array kFp8{DType::kF8E4M3, DType::kF8E5M2};
  constexpr std::array kOut{DType::kBF16, DType::kF16, DType::kF32};
  if (!take_name(rest, kFp8, dtype_torch_name, &p.a_dtype) || !take_name(rest, kFp8, dtype_torch_name, &p.b_dtype)) {
    if (op.find("fnuz") != std::string::npos) return bad("the fnuz fp8 types are ROCm's; CUDA's are e4m3fn and e5m2");
    return bad("A and B must be Float8_e4m3fn or Float8_e5m2");
  }
  if (!take_name(rest, kOut, dtype_torch_name, &p.out_dtype)) return bad("the output must be BFloat16, Half or float");
  if (rest.size() != 2) return bad("op must end with _<NN|NT|TN|TT>");
  p.transa = rest[0];
  p.transb = rest[1];

  // <tt>_<m>_<n>_<k>_ld_<lda>_<ldb>_<ldc>_rw_<0|1>_bias_<dtype|None>: exactly 12 fields.
  std::vector<std::string> f;
  for (size_t start = 0;;) {
    const size_t at = params.find('_', start);
    f.push_back(params.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  if (f.size() != 12 || f[4] != "ld" || f[8] != "rw" || f[10] != "bias")
    return bad("params must look like tn_<m>_<n>_<k>_ld_<lda>_<ldb>_<ldc>_rw_<0|1>_bias_<None|BFloat16|Half|Float>");
  if (f[0].size() != 2 || char(std::toupper(static_cast<unsigned char>(f[0][0]))) != p.transa ||
      char(std::toupper(static_cast<unsigned char>(f[0][1]))) != p.transb)
    return bad("transposes in op and params differ");
  int64_t* ints[] = {&p.m, &p.n, &p.k, &p.lda, &p.ldb, &p.ldc};
  const size_t at[] = {1, 2, 3, 5, 6, 7};
  for (size_t i = 0; i < 6; ++i)
    if (f[at[i]].empty() || !std::isdigit(static_cast<unsigned char>(f[at[i]][0])) ||
        !parse_int64(f[at[i]], ints[i], 0))
      return bad("sizes must be non-negative integers below 2^63");
  if (f[9] != "0" && f[9] != "1") return bad("rw must be 0 or 1");
  p.scale_mode = f[9] == "1" ? ScaleMode::kRowwise : ScaleMode::kTensorwise;
  if (f[11] != "None") {
    bool found = false;
    for (DType t : kOut)
      if (f[11] == bias_name(t)) p.bias_dtype = t, found = true;
    if (!found) return bad("bias must be None, BFloat16, Half or Float");
  }
  Status st = p.validate();
  if (!st.is_ok()) return bad(st.message());
  return p;
}

ScaledGemmParams scaled_linear_params(DType fp8, DType out_dtype, ScaleMode mode, int64_t tokens, int64_t in,
                                      int64_t out) {
  ScaledGemmParams p;
  p.a_dtype = p.b_dtype = fp8;
  p.out_dtype = out_dtype;
  p.scale_mode = mode;
  p.transa = 'T';
  p.transb = 'N';
  p.m = out;
  p.n = tokens;
  p.k = in;
  return p.with_defaults();
}

}  // namespace tunableop
