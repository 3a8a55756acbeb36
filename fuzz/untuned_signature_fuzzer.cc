// Fuzzes the untuned-file readers (UntunedFile::read and the offline-tuning problem list) and
// the GEMM / GemmAndBias / ScaledGemm / FusedLinear / Attention signature parsers behind them: no
// crash on any text, every problem that parses is valid and its signature parses back to the same
// parameters.
#include <cstdint>
#include <string>

#include "core/results_stats.h"
#include "fuzz_util.h"
#include "tunableop/attention.h"
#include "tunableop/checked_size.h"
#include "tunableop/fused_linear.h"
#include "tunableop/gemm.h"
#include "tunableop/gemm_and_bias.h"
#include "tunableop/results.h"
#include "tunableop/scaled_gemm.h"

using namespace tunableop;

namespace {

bool same(const GemmParams& a, const GemmParams& b) {
  return a.dtype == b.dtype && a.transa == b.transa && a.transb == b.transb && a.m == b.m && a.n == b.n && a.k == b.k &&
         a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc && a.batch == b.batch &&
         (a.batch == 1 || (a.stride_a == b.stride_a && a.stride_b == b.stride_b && a.stride_c == b.stride_c)) &&
         a.allow_tf32 == b.allow_tf32;
}

void check_problem(const std::string& op, const std::string& params) {
  if (auto p = parse_gemm_signature(op, params); p.is_ok()) {
    FUZZ_CHECK(p->validate().is_ok(), "parsed but invalid: %s,%s", op.c_str(), params.c_str());
    for (int64_t span : {p->a_span(), p->b_span(), p->c_span()})
      FUZZ_CHECK(span >= 0 && checked_bytes(span, dtype_size(p->dtype)), "span does not fit: %s", params.c_str());
    auto back = parse_gemm_signature(gemm_op_signature(*p), gemm_params_signature(*p));
    FUZZ_CHECK(back.is_ok() && same(*p, *back), "signature round trip failed for %s,%s -> %s,%s", op.c_str(),
               params.c_str(), gemm_op_signature(*p).c_str(), gemm_params_signature(*p).c_str());
  }
  if (auto p = parse_fused_linear_signature(op, params); p.is_ok()) {
    FUZZ_CHECK(p->validate().is_ok(), "parsed but invalid: %s,%s", op.c_str(), params.c_str());
    auto back = parse_fused_linear_signature(fused_linear_op_signature(*p), fused_linear_params_signature(*p));
    FUZZ_CHECK(back.is_ok() && fused_linear_params_signature(*back) == fused_linear_params_signature(*p),
               "FusedLinear signature round trip failed for %s,%s", op.c_str(), params.c_str());
  }
  if (auto p = parse_attention_signature(op, params); p.is_ok()) {
    FUZZ_CHECK(p->validate().is_ok(), "parsed but invalid: %s,%s", op.c_str(), params.c_str());
    auto back = parse_attention_signature(attention_op_signature(*p), attention_params_signature(*p));
    FUZZ_CHECK(back.is_ok() && attention_params_signature(*back) == attention_params_signature(*p),
               "Attention signature round trip failed for %s,%s", op.c_str(), params.c_str());
  }
  if (auto p = parse_scaled_gemm_signature(op, params); p.is_ok()) {
    FUZZ_CHECK(p->validate().is_ok(), "parsed but invalid: %s,%s", op.c_str(), params.c_str());
    const std::string o = scaled_gemm_op_signature(*p), q = scaled_gemm_params_signature(*p);
    auto back = parse_scaled_gemm_signature(o, q);
    FUZZ_CHECK(back.is_ok() && scaled_gemm_op_signature(*back) == o && scaled_gemm_params_signature(*back) == q,
               "ScaledGemm signature round trip failed for %s,%s", op.c_str(), params.c_str());
  }
  if (auto p = parse_gemm_and_bias_signature(op, params); p.is_ok()) {
    FUZZ_CHECK(p->validate().is_ok(), "parsed but invalid: %s,%s", op.c_str(), params.c_str());
    auto back = parse_gemm_and_bias_signature(gemm_and_bias_op_signature(*p), gemm_and_bias_params_signature(*p));
    FUZZ_CHECK(back.is_ok() && same(p->gemm, back->gemm) && p->act == back->act,
               "GemmAndBias signature round trip failed for %s,%s", op.c_str(), params.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> malformed;
  for (const auto& [op, params] : parse_problem_list(text, "fuzz.csv", &malformed)) check_problem(op, params);

  tunableop::fuzz::clear_scratch();
  const std::string path = tunableop::fuzz::scratch_dir() + "/untuned.csv";
  tunableop::fuzz::write_file(path, text);
  if (auto lines = UntunedFile::read(path); lines.is_ok()) {
    for (const auto& [op, params] : *lines) check_problem(op, params);
    // Recording one more problem keeps every line that was there readable.
    UntunedFile u(path);
    if (u.record("GemmTunableOp_float_NN", "nn_2_3_4").is_ok()) {
      auto after = UntunedFile::read(path);
      FUZZ_CHECK(after.is_ok() && after->size() >= lines->size(), "recording lost lines");
    }
  }
  return 0;
}
