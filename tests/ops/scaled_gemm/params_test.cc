// ScaledGemm's params: validation, PyTorch's signature strings byte for byte, their parser.
#include <gtest/gtest.h>

#include <array>
#include <set>

#include "ops/scaled_gemm/definition.h"
#include "tunableop/gemm.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {
namespace {

using Def = ops::OpDefinition<ScaledGemmOp>;

ScaledGemmParams parse_ok(const std::string& op, const std::string& params) {
  auto p = parse_scaled_gemm_signature(op, params);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return p.is_ok() ? *p : ScaledGemmParams{};
}

TEST(ScaledGemmSignature, ReadsAndWritesPyTorchsLineExactly) {
  const std::string op = "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN";
  const std::string params = "tn_64_12288_2048_ld_2048_2048_64_rw_1_bias_None";
  const ScaledGemmParams p = parse_ok(op, params);
  EXPECT_EQ(p.a_dtype, DType::kF8E4M3);
  EXPECT_EQ(p.b_dtype, DType::kF8E4M3);
  EXPECT_EQ(p.out_dtype, DType::kBF16);
  EXPECT_FALSE(p.has_bias());
  EXPECT_EQ(p.scale_mode, ScaleMode::kRowwise);
  EXPECT_EQ(p.transa, 'T');
  EXPECT_EQ(p.transb, 'N');
  EXPECT_EQ(p.m, 64);
  EXPECT_EQ(p.n, 12288);
  EXPECT_EQ(p.k, 2048);
  EXPECT_EQ(p.lda, 2048);
  EXPECT_EQ(p.ldb, 2048);
  EXPECT_EQ(p.ldc, 64);
  EXPECT_EQ(scaled_gemm_op_signature(p), op);
  EXPECT_EQ(scaled_gemm_params_signature(p), params);
}

TEST(ScaledGemmSignature, SpellsTypesAsPyTorchDoes) {
  ScaledGemmParams p = scaled_linear_params(DType::kF8E4M3, DType::kF32, ScaleMode::kTensorwise, 5, 32, 48);
  p.b_dtype = DType::kF8E5M2;
  p.bias_dtype = DType::kF32;
  // The op name spells C by TypeName<float> ("float"); the bias by c10's ScalarType ("Float").
  EXPECT_EQ(scaled_gemm_op_signature(p), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_float_TN");
  EXPECT_EQ(scaled_gemm_params_signature(p), "tn_48_5_32_ld_32_32_48_rw_0_bias_Float");
  p.out_dtype = DType::kF16;
  p.bias_dtype = DType::kF16;
  EXPECT_EQ(scaled_gemm_op_signature(p), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_Half_TN");
  EXPECT_EQ(scaled_gemm_params_signature(p), "tn_48_5_32_ld_32_32_48_rw_0_bias_Half");
  p.bias_dtype = DType::kBF16;
  EXPECT_EQ(scaled_gemm_params_signature(p), "tn_48_5_32_ld_32_32_48_rw_0_bias_BFloat16");
}

TEST(ScaledGemmSignature, EveryKindOfProblemRoundTripsAndHasItsOwnKey) {
  std::set<std::string> sigs;
  std::set<uint64_t> keys;
  int count = 0;
  for (DType a : {DType::kF8E4M3, DType::kF8E5M2})
    for (DType b : {DType::kF8E4M3, DType::kF8E5M2})
      for (DType out : {DType::kBF16, DType::kF16, DType::kF32})
        for (int bias = -1; bias < 3; ++bias)
          for (ScaleMode mode : {ScaleMode::kTensorwise, ScaleMode::kRowwise})
            for (const char* t : {"NN", "NT", "TN", "TT"}) {
              ScaledGemmParams p;
              p.a_dtype = a, p.b_dtype = b, p.out_dtype = out, p.scale_mode = mode;
              if (bias >= 0) p.bias_dtype = std::array{DType::kBF16, DType::kF16, DType::kF32}[size_t(bias)];
              p.transa = t[0], p.transb = t[1];
              p.m = 7, p.n = 3, p.k = 5, p.lda = 11, p.ldb = 13, p.ldc = 17;
              ASSERT_TRUE(p.validate().is_ok()) << p.validate().to_string();
              const std::string op = scaled_gemm_op_signature(p), params = scaled_gemm_params_signature(p);
              const ScaledGemmParams q = parse_ok(op, params);
              EXPECT_EQ(scaled_gemm_op_signature(q), op);
              EXPECT_EQ(scaled_gemm_params_signature(q), params);
              EXPECT_TRUE(Def::key(q) == Def::key(p)) << op << "," << params;
              sigs.insert(op + "," + params);
              keys.insert(Def::key(p).hash());
              ++count;
            }
  EXPECT_EQ(sigs.size(), size_t(count));
  EXPECT_EQ(keys.size(), size_t(count));
}

TEST(ScaledGemmSignature, RefusesWhatItCannotReadAndSaysWhy) {
  const std::string op = "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN";
  const std::string ok = "tn_64_128_256_ld_256_256_64_rw_0_bias_None";
  struct Case {
    std::string op, params, why;
  };
  const Case cases[] = {
      {"ScaledGemmTunableOp_Float8_e4m3fnuz_Float8_e4m3fnuz_BFloat16_TN", ok, "ROCm"},
      {"GemmTunableOp_BFloat16_TN", ok, "ScaledGemmTunableOp_"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_Float8_e4m3fn_TN", ok, "output"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_double_TN", ok, "output"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_T", ok, "_<NN|NT|TN|TT>"},
      {op, "nt_64_128_256_ld_256_256_64_rw_0_bias_None", "transposes"},
      {op, "tn_64_128_256_rw_0_bias_None", "params must look like"},
      {op, "tn_64_128_256_ld_256_256_64_rw_0", "params must look like"},
      {op, "tn_64_128_256_ld_256_256_64_rw_2_bias_None", "rw must be 0 or 1"},
      {op, "tn_64_128_256_ld_256_256_64_rw_0_bias_float", "bias must be"},
      {op, "tn_64_-128_256_ld_256_256_64_rw_0_bias_None", "non-negative"},
      {op, "tn_64_128_256_ld_256_256_99999999999999999999_rw_0_bias_None", "below 2^63"},
      {op, "tn_64_128_256_ld_255_256_64_rw_0_bias_None", "lda"},
      {op, "tn_64_128_0_ld_1_1_64_rw_0_bias_None", "k >= 1"},
      {op, "tn_64_128_256_ld_256_256_64_rw_0_bias_None_", "params must look like"},
  };
  for (const Case& c : cases) {
    auto p = parse_scaled_gemm_signature(c.op, c.params);
    ASSERT_FALSE(p.is_ok()) << c.op << "," << c.params;
    EXPECT_EQ(p.status().code(), StatusCode::kParseError);
    EXPECT_NE(p.status().message().find(c.why), std::string::npos) << p.status().message();
  }
}

TEST(ScaledGemmParams, ValidateNamesTheBadField) {
  const ScaledGemmParams good = scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, 3, 64, 32);
  ASSERT_TRUE(good.validate().is_ok());
  auto fails = [](ScaledGemmParams p, const char* why) {
    Status st = p.with_defaults().validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << why;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  ScaledGemmParams p = good;
  p.a_dtype = DType::kBF16;
  fails(p, "fp8");
  p = good;
  p.out_dtype = DType::kF8E4M3;
  fails(p, "output");
  p = good;
  p.bias_dtype = DType::kF64;
  fails(p, "bias");
  p = good;
  p.k = 0;
  fails(p, "k >= 1");
  p = good;
  p.ldc = 31;
  fails(p, "ldc");
  p = good;
  p.transa = 'X';
  fails(p, "transa");
  p = good;
  p.lda = int64_t(1) << 62;
  fails(p, "64-bit");
  EXPECT_EQ(good.scale_a_count(), 32);
  EXPECT_EQ(good.scale_b_count(), 3);
  p = good;
  p.scale_mode = ScaleMode::kTensorwise;
  EXPECT_EQ(p.scale_a_count(), 1);
  EXPECT_EQ(p.scale_b_count(), 1);
}

TEST(ScaledGemmParams, OtherOpsRefuseFp8) {
  GemmParams g = linear_params(DType::kBF16, 4, 16, 16);
  g.dtype = DType::kF8E4M3;
  Status st = g.validate();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ScaledGemm"), std::string::npos) << st.message();
  EXPECT_FALSE(parse_gemm_signature("GemmTunableOp_Float8_e4m3fn_TN", "tn_16_4_16").is_ok());
}

}  // namespace
}  // namespace tunableop
