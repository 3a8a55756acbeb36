// AttentionParams: defaults, validation messages naming the bad field, spans, work counts and
// the problem-key strings (round trip and malformed input).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/attention/params.h"

namespace tunableop {
namespace {

AttentionParams llama_prefill() {
  AttentionParams p;
  p.dtype = DType::kBF16, p.causal = true, p.batch = 1, p.q_len = 2048, p.kv_len = 2048;
  p.heads = 32, p.kv_heads = 8, p.head_dim = 128;
  return p.with_defaults();
}

::testing::AssertionResult invalid_naming(const Status& st, const std::string& field) {
  if (st.code() != StatusCode::kInvalidArgument)
    return ::testing::AssertionFailure() << "expected invalid argument, got " << st.to_string();
  if (st.message().find(field) == std::string::npos)
    return ::testing::AssertionFailure() << "message does not name '" << field << "': " << st.message();
  return ::testing::AssertionSuccess();
}

TEST(AttentionParams, DefaultsAndSpans) {
  AttentionParams p = llama_prefill();
  EXPECT_EQ(p.q_row_stride, 32 * 128);
  EXPECT_EQ(p.o_row_stride, 32 * 128);
  EXPECT_EQ(p.max_seq, 2048);
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_EQ(p.q_span(), 2048 * 32 * 128);
  EXPECT_EQ(p.kv_span(), 8 * 2048 * 128);
  EXPECT_DOUBLE_EQ(p.softmax_scale(), 1.0 / std::sqrt(128.0));

  AttentionParams pg = llama_prefill();
  pg.page_size = 64, pg.kv_len = 2000, pg.q_len = 1, pg.max_seq = 0;
  pg = pg.with_defaults();
  EXPECT_EQ(pg.pages_per_seq, 32);  // ceil(2000 / 64)
  EXPECT_EQ(pg.num_pages, 32);
  EXPECT_EQ(pg.kv_span(), 32 * 8 * 64 * 128);
  EXPECT_EQ(pg.block_table_span(), 32);
  EXPECT_TRUE(pg.validate().is_ok());
}

TEST(AttentionParams, CausalFlopsAreTheVisibleTriangle) {
  AttentionParams p = llama_prefill();
  const double full = 4.0 * 32 * 128 * 2048.0 * 2048.0;
  EXPECT_DOUBLE_EQ(p.flops(), full * (2048.0 * 2048.0 - 2048.0 * 2047.0 / 2.0) / (2048.0 * 2048.0));
  p.causal = false;
  EXPECT_DOUBLE_EQ(p.flops(), full);
  // Decode: one query sees every key.
  p.causal = true, p.q_len = 1, p.kv_len = 4096;
  EXPECT_DOUBLE_EQ(p.flops(), 4.0 * 32 * 128 * 4096.0);
  EXPECT_DOUBLE_EQ(p.kv_bytes(), 2.0 * 8 * 4096 * 128 * 2);
}

TEST(AttentionParams, ValidationNamesTheField) {
  auto with = [](auto edit) {
    AttentionParams p = llama_prefill();
    edit(p);
    return p.with_defaults().validate();
  };
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.kv_heads = 3; }), "kv_heads"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.head_dim = 520; }), "head_dim"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.batch = 0; }), "batch"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.q_len = 4096; }), "q_len"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.q_row_stride = 100; }), "q_row_stride"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.o_row_stride = 4095; }), "o_row_stride"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.max_seq = 1000; }), "max_seq"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.scale = -1; }), "scale"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.dtype = DType::kF64; }), "dtype"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.page_size = 16, p.pages_per_seq = 3; }), "pages_per_seq"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.heads = int64_t(1) << 40; }), "heads"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.window = -1; }), "window"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.window = 64, p.causal = false; }), "window"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.softcap = -2; }), "softcap"));
  EXPECT_TRUE(invalid_naming(with([](AttentionParams& p) { p.softcap = INFINITY; }), "softcap"));
  // Not causal: any q_len.
  EXPECT_TRUE(with([](AttentionParams& p) { p.causal = false, p.q_len = 4096; }).is_ok());
}

TEST(AttentionSignature, PyTorchStyleStrings) {
  AttentionParams p = llama_prefill();
  EXPECT_EQ(attention_op_signature(p), "AttentionTunableOp_BFloat16_causal");
  EXPECT_EQ(attention_params_signature(p), "b1_q2048_k2048_h32_kv8_d128");
  p.causal = false, p.dtype = DType::kF16;
  EXPECT_EQ(attention_op_signature(p), "AttentionTunableOp_Half_full");
  AttentionParams d = llama_prefill();
  d.q_len = 1, d.kv_len = 4096, d.page_size = 64, d.max_seq = 0;
  EXPECT_EQ(attention_params_signature(d), "b1_q1_k4096_h32_kv8_d128_p64");
}

TEST(AttentionSignature, RoundTrip) {
  std::vector<AttentionParams> all;
  all.push_back(llama_prefill());
  AttentionParams a = llama_prefill();
  a.batch = 3, a.q_len = 1, a.kv_len = 777, a.page_size = 16, a.pages_per_seq = 64, a.num_pages = 500;
  a.var_kv_len = true, a.max_seq = 0;
  all.push_back(a);
  AttentionParams v = llama_prefill();
  v.batch = 4, v.var_q_len = true, v.var_kv_len = true;  // a padded batch of prompts
  all.push_back(v);
  AttentionParams b = llama_prefill();
  b.dtype = DType::kF32, b.causal = false, b.max_seq = 4096, b.q_row_stride = 48 * 128, b.o_row_stride = 33 * 128;
  b.scale = 0.0625;
  all.push_back(b);
  AttentionParams w = llama_prefill();  // Gemma-2's local layer in decode: window, cap, scale
  w.q_len = 1, w.kv_len = 8192, w.max_seq = 0, w.window = 4096, w.softcap = 50, w.scale = double(1.0f / 12);
  all.push_back(w);
  for (const auto& p0 : all) {
    const AttentionParams p = p0.with_defaults();
    const std::string op = attention_op_signature(p), params = attention_params_signature(p);
    auto back = parse_attention_signature(op, params);
    ASSERT_TRUE(back.is_ok()) << op << "," << params << ": " << back.status().to_string();
    EXPECT_EQ(attention_op_signature(*back), op);
    EXPECT_EQ(attention_params_signature(*back), params);
    EXPECT_EQ(back->page_size, p.page_size);
    EXPECT_EQ(back->num_pages, p.num_pages);
    EXPECT_EQ(back->max_seq, p.max_seq);
    EXPECT_EQ(back->var_kv_len, p.var_kv_len);
    EXPECT_EQ(back->var_q_len, p.var_q_len);
    EXPECT_EQ(back->scale, p.scale);
    EXPECT_EQ(back->window, p.window);
    EXPECT_EQ(back->softcap, p.softcap);
  }
}

// Window and softcap appear in the key only when set: results files without them stay valid.
TEST(AttentionSignature, WindowAndSoftcapOnlyWhenSet) {
  AttentionParams p = llama_prefill();
  const std::string plain = attention_params_signature(p);
  p.window = 4096;
  EXPECT_EQ(attention_params_signature(p), plain + "_w4096");
  p.softcap = 50;
  EXPECT_EQ(attention_params_signature(p), plain + "_w4096_cap50");
  p.window = 0;
  EXPECT_EQ(attention_params_signature(p), plain + "_cap50");
  auto back = parse_attention_signature(attention_op_signature(p), plain + "_cap50");
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->softcap, 50.0);
  EXPECT_EQ(back->window, 0);
  for (const char* bad : {"_w0", "_w-3", "_cap", "_capx", "_cap-1", "_w4096_w4096"}) {
    auto r = parse_attention_signature(attention_op_signature(p), plain + bad);
    EXPECT_FALSE(r.is_ok()) << bad;
  }
  // A window needs causal attention (in a file too).
  EXPECT_FALSE(parse_attention_signature("AttentionTunableOp_float_full", "b1_q4_k4_h1_kv1_d64_w2").is_ok());
}

TEST(AttentionParams, WindowLimitsTheVisibleKeys) {
  AttentionParams p = llama_prefill();  // 2048 queries over 2048 keys
  p.window = 512;
  // Queries 0..511 see i + 1 keys, the other 1536 see 512 each.
  const double visible = 512.0 * 513.0 / 2.0 + 1536.0 * 512.0;
  EXPECT_DOUBLE_EQ(p.flops(), 4.0 * 32 * 128 * visible);
  p.window = 4096;  // longer than the sequence: no change
  EXPECT_DOUBLE_EQ(p.flops(), llama_prefill().flops());
  AttentionParams d = llama_prefill();
  d.q_len = 1, d.kv_len = 8192, d.max_seq = 0, d.window = 1024;
  d = d.with_defaults();
  EXPECT_DOUBLE_EQ(d.flops(), 4.0 * 32 * 128 * 1024.0);
  EXPECT_DOUBLE_EQ(d.kv_bytes(), 2.0 * 8 * 1024 * 128 * 2);
}

TEST(AttentionSignature, MalformedIsAParseError) {
  const char* op = "AttentionTunableOp_BFloat16_causal";
  const std::pair<const char*, const char*> bad[] = {
      {"GemmTunableOp_BFloat16_TN", "b1_q1_k1_h1_kv1_d64"},
      {"AttentionTunableOp_BFloat16_sideways", "b1_q1_k1_h1_kv1_d64"},
      {"AttentionTunableOp_Quarter_causal", "b1_q1_k1_h1_kv1_d64"},
      {op, ""},
      {op, "b1_q1_k1_h1_kv1"},              // no head dim
      {op, "q1_b1_k1_h1_kv1_d64"},          // order
      {op, "b1_q1_k1_h1_kv1_d64_"},         // trailing separator
      {op, "b1_q1_k1_h1_kv1_d64_zz3"},      // unknown field
      {op, "b1_q1_k1_h1_kv1_d64_p16_p16"},  // twice
      {op, "b1_q1_k1_h1_kv1_d6x4"},         // not a number
      {op, "b1_q-1_k1_h1_kv1_d64"},
      {op, "b1_q8_k4_h1_kv1_d64"},  // causal q_len > kv_len
      {op, "b1_q1_k1_h1_kv1_d64_sc"},
      {op, "b1_q1_k1_h1_kv1_d64_sc0.1x"},
      {op, "b1_p16_q1_k1_h1_kv1_d64"},  // optional before required
  };
  for (auto [o, prm] : bad) {
    auto r = parse_attention_signature(o, prm);
    ASSERT_FALSE(r.is_ok()) << o << "," << prm;
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << o << "," << prm;
  }
}

// Sizes whose products overflow int64, read from a file (an untuned_signature fuzz finding: the
// head dim 6611686018427387904 overflowed heads * head_dim in with_defaults(), before any check):
// refused with a message, no arithmetic overflows on the way (UBSan in the hardening job).
TEST(AttentionSignature, HugeSizesAreRefusedWithoutOverflow) {
  const char* op = "AttentionTunableOp_float_causal";
  for (const char* prm : {"b2_q1_k4096_h8_kv2_d6611686018427387904", "b1_q1_k1_h9223372036854775807_kv1_d2",
                          "b1_q1_k9223372036854775807_h1_kv1_d64_p4096", "b9223372036854775807_q1_k64_h1_kv1_d64_p16",
                          "b1_q1_k64_h1_kv1_d64_p16_pp9223372036854775807"}) {
    auto r = parse_attention_signature(op, prm);
    ASSERT_FALSE(r.is_ok()) << prm;
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << prm;
  }
  // The signature of unvalidated params (e.g. in a message) is defined too.
  AttentionParams p;
  p.heads = INT64_MAX, p.head_dim = 4, p.batch = INT64_MAX, p.kv_len = INT64_MAX, p.page_size = 16;
  EXPECT_NE(attention_params_signature(p).find("_d4"), std::string::npos);
}

}  // namespace
}  // namespace tunableop
