// Problem keys in PyTorch TunableOp's exact layout, and parsing them back for offline tuning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/gemm_testing.h"
#include "tunableop/gemm.h"

namespace tunableop {
namespace {

GemmParams make(DType dt, char ta, char tb, int64_t m, int64_t n, int64_t k) {
  GemmParams p;
  p.dtype = dt;
  p.transa = ta;
  p.transb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  return p;
}

TEST(GemmSignature, SeedExampleLayout) {
  GemmParams p = make(DType::kF32, 'T', 'N', 1024, 512, 2048).with_defaults();
  EXPECT_EQ(gemm_op_signature(p), "GemmTunableOp_float_TN");
  EXPECT_EQ(gemm_params_signature(p), "tn_1024_512_2048");
  GemmParams q = make(DType::kF32, 'N', 'T', 7, 9, 11).with_defaults();
  EXPECT_EQ(gemm_op_signature(q), "GemmTunableOp_float_NT");
  EXPECT_EQ(gemm_params_signature(q), "nt_7_9_11");
  GemmParams r = make(DType::kF64, 'N', 'N', 1, 1, 1).with_defaults();
  EXPECT_EQ(gemm_op_signature(r), "GemmTunableOp_double_NN");
  EXPECT_EQ(gemm_params_signature(r), "nn_1_1_1");
  GemmParams t = make(DType::kF32, 'T', 'T', 3, 2, 1).with_defaults();
  EXPECT_EQ(gemm_op_signature(t), "GemmTunableOp_float_TT");
  EXPECT_EQ(gemm_params_signature(t), "tt_3_2_1");
}

TEST(GemmSignature, DtypeNamesArePytorchs) {
  EXPECT_STREQ(dtype_torch_name(DType::kF32), "float");
  EXPECT_STREQ(dtype_torch_name(DType::kF64), "double");
  EXPECT_STREQ(dtype_torch_name(DType::kBF16), "BFloat16");
  EXPECT_STREQ(dtype_torch_name(DType::kF16), "Half");
  EXPECT_EQ(gemm_op_signature(make(DType::kBF16, 'N', 'T', 2, 2, 2).with_defaults()), "GemmTunableOp_BFloat16_NT");
  EXPECT_EQ(gemm_op_signature(make(DType::kF16, 'T', 'N', 2, 2, 2).with_defaults()), "GemmTunableOp_Half_TN");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF64), 8u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
}

TEST(GemmSignature, ParseDtypeAcceptsBothNameSets) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    EXPECT_EQ(*parse_dtype(dtype_name(t)), t);
    EXPECT_EQ(*parse_dtype(dtype_torch_name(t)), t);
  }
  auto bad = parse_dtype("int8");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("int8"), std::string::npos);
}

TEST(GemmSignature, LeadingDimensionsOnlyWhenNotDense) {
  // TN: A is stored k x m, B is k x n, C is m x n.
  GemmParams p = make(DType::kF32, 'T', 'N', 1024, 512, 2048);
  p.lda = 2048;
  p.ldb = 2048;
  p.ldc = 1024;
  EXPECT_EQ(gemm_params_signature(p.with_defaults()), "tn_1024_512_2048") << "explicit dense lds are still dense";
  p.ldc = 1040;
  EXPECT_EQ(gemm_params_signature(p.with_defaults()), "tn_1024_512_2048_ld_2048_2048_1040");
  GemmParams q = make(DType::kF32, 'N', 'T', 5, 6, 7);
  q.lda = 8;  // A is 5 x 7 stored with ld 8
  EXPECT_EQ(gemm_params_signature(q.with_defaults()), "nt_5_6_7_ld_8_6_5");
  GemmParams r = make(DType::kF64, 'N', 'N', 5, 6, 7);
  r.ldb = 9;
  EXPECT_EQ(gemm_params_signature(r.with_defaults()), "nn_5_6_7_ld_5_9_5");
}

TEST(GemmSignature, StridedBatched) {
  GemmParams p = make(DType::kF32, 'N', 'T', 64, 32, 16);
  p.batch = 12;
  GemmParams d = p.with_defaults();
  EXPECT_EQ(gemm_op_signature(d), "GemmStridedBatchedTunableOp_float_NT");
  EXPECT_EQ(gemm_params_signature(d), "nt_64_32_16_B_12");
  EXPECT_EQ(d.stride_a, 64 * 16);
  EXPECT_EQ(d.stride_b, 32 * 16);
  EXPECT_EQ(d.stride_c, 64 * 32);
  p.stride_c = 64 * 32 + 8;  // a gap between the matrices of C
  EXPECT_EQ(gemm_params_signature(p.with_defaults()), "nt_64_32_16_B_12_S_1024_512_2056");
  p.ldc = 70;
  p.stride_c = 70 * 32;
  EXPECT_EQ(gemm_params_signature(p.with_defaults()), "nt_64_32_16_ld_64_32_70_B_12")
      << "strides dense for the given lds need no _S_";
  // A batch of one is an ordinary GEMM.
  GemmParams one = make(DType::kF32, 'N', 'N', 2, 3, 4);
  one.batch = 1;
  EXPECT_EQ(gemm_op_signature(one.with_defaults()), "GemmTunableOp_float_NN");
  EXPECT_EQ(gemm_params_signature(one.with_defaults()), "nn_2_3_4");
}

TEST(GemmSignature, Tf32IsPartOfTheOpName) {
  GemmParams p = make(DType::kF32, 'T', 'N', 8, 8, 8);
  p.allow_tf32 = true;
  EXPECT_EQ(gemm_op_signature(p.with_defaults()), "GemmTunableOp_float_tf32_TN");
  auto back = parse_gemm_signature("GemmTunableOp_float_tf32_TN", "tn_8_8_8");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(back->allow_tf32);
  EXPECT_EQ(back->dtype, DType::kF32);
}

TEST(GemmSignature, AWiderCFollowsTheInputsDtype) {
  GemmParams p = make(DType::kBF16, 'T', 'N', 4096, 3, 1024);
  p.out_dtype = DType::kF32;
  EXPECT_EQ(gemm_op_signature(p.with_defaults()), "GemmTunableOp_BFloat16_float_TN");
  p.batch = 2;
  EXPECT_EQ(gemm_op_signature(p.with_defaults()), "GemmStridedBatchedTunableOp_BFloat16_float_TN");
  auto back = parse_gemm_signature("GemmTunableOp_Half_float_NT", "nt_5_6_7");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->dtype, DType::kF16);
  EXPECT_EQ(back->c_dtype(), DType::kF32);
  EXPECT_TRUE(back->widens());
  // C of the inputs' dtype is spelled once: out_dtype equal to dtype is no wider C.
  GemmParams same = make(DType::kBF16, 'T', 'N', 8, 8, 8);
  same.out_dtype = DType::kBF16;
  EXPECT_EQ(gemm_op_signature(same.with_defaults()), "GemmTunableOp_BFloat16_TN");
  EXPECT_FALSE(same.with_defaults().out_dtype.has_value());
  EXPECT_FALSE(parse_gemm_signature("GemmTunableOp_BFloat16_int8_TN", "tn_8_8_8").is_ok());
  EXPECT_FALSE(parse_gemm_signature("GemmTunableOp_float_BFloat16_TN", "tn_8_8_8").is_ok())
      << "a C narrower than the inputs is not a GEMM problem";
}

TEST(GemmSignature, LinearIsTheSeedsTnProblem) {
  GemmParams p = linear_params(DType::kF32, /*tokens=*/8, /*in=*/2048, /*out=*/2560);
  EXPECT_EQ(gemm_op_signature(p), "GemmTunableOp_float_TN");
  EXPECT_EQ(gemm_params_signature(p), "tn_2560_8_2048");
  EXPECT_EQ(p.m, 2560);
  EXPECT_EQ(p.n, 8);
  EXPECT_EQ(p.k, 2048);
  EXPECT_EQ(p.lda, 2048);
  EXPECT_EQ(p.ldb, 2048);
  EXPECT_EQ(p.ldc, 2560);
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_EQ(gemm_params_signature(linear_params(DType::kBF16, 1, 4096, 11008)), "tn_11008_1_4096");
}

void expect_same(const GemmParams& a, const GemmParams& b) {
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.transa, b.transa);
  EXPECT_EQ(a.transb, b.transb);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.lda, b.lda);
  EXPECT_EQ(a.ldb, b.ldb);
  EXPECT_EQ(a.ldc, b.ldc);
  EXPECT_EQ(a.batch, b.batch);
  if (a.batch > 1) {
    EXPECT_EQ(a.stride_a, b.stride_a);
    EXPECT_EQ(a.stride_b, b.stride_b);
    EXPECT_EQ(a.stride_c, b.stride_c);
  }
  EXPECT_EQ(a.allow_tf32, b.allow_tf32);
}

TEST(GemmSignature, ParseRoundTripsEveryForm) {
  std::vector<GemmParams> all;
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    auto shapes = testing::random_gemm_shapes(t, 11 + uint64_t(t), 24, /*with_batches=*/true, 300);
    all.insert(all.end(), shapes.begin(), shapes.end());
  }
  all.push_back(make(DType::kF32, 'T', 'N', 1024, 512, 2048).with_defaults());
  all.push_back(linear_params(DType::kF32, 8, 2048, 2560));
  int with_ld = 0, with_b = 0, with_s = 0;
  for (const GemmParams& p : all) {
    const std::string op = gemm_op_signature(p), ps = gemm_params_signature(p);
    with_ld += ps.find("_ld_") != std::string::npos;
    with_b += ps.find("_B_") != std::string::npos;
    with_s += ps.find("_S_") != std::string::npos;
    auto back = parse_gemm_signature(op, ps);
    ASSERT_TRUE(back.is_ok()) << op << "," << ps << ": " << back.status().to_string();
    SCOPED_TRACE(op + "," + ps);
    expect_same(*back, p);
    EXPECT_EQ(gemm_op_signature(*back), op);
    EXPECT_EQ(gemm_params_signature(*back), ps);
  }
  // The sample covers every optional part of the layout.
  EXPECT_GT(with_ld, 0);
  EXPECT_GT(with_b, 0);
  EXPECT_GT(with_s, 0);
}

TEST(GemmSignature, ParseAcceptsLargeSizes) {
  auto p = parse_gemm_signature("GemmTunableOp_float_NN", "nn_65536_32000_8192");
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->m, 65536);
  EXPECT_EQ(p->n, 32000);
  EXPECT_EQ(p->k, 8192);
}

TEST(GemmSignature, ParseRejectsMalformedStrings) {
  struct Case {
    std::string op, params, why;  // `why`: part of the message
  };
  const Case cases[] = {
      {"", "nn_1_2_3", "op must look like"},
      {"Gemm_float_NN", "nn_1_2_3", "op must look like"},
      {"GemmTunableOp_NN", "nn_1_2_3", "op must look like"},
      {"GemmTunableOp_float_N", "nn_1_2_3", "op must look like"},
      {"GemmTunableOp_float_NNN", "nn_1_2_3", "op must look like"},
      {"GemmTunableOp_int8_NN", "nn_1_2_3", "int8"},
      {"GemmTunableOp_float_XN", "xn_1_2_3", "transa"},
      {"GemmTunableOp_float_NX", "nx_1_2_3", "transb"},
      {"GemmTunableOp_float_NN", "", "params must start with"},
      {"GemmTunableOp_float_NN", "nn_1_2", "params must start with"},
      {"GemmTunableOp_float_NN", "n_1_2_3", "params must start with"},
      {"GemmTunableOp_float_NN", "tn_1_2_3", "transposes in op and params differ"},
      {"GemmTunableOp_float_NN", "nn_a_2_3", "integers"},
      {"GemmTunableOp_float_NN", "nn_-1_2_3", "integers"},
      {"GemmTunableOp_float_NN", "nn_1_2_3.5", "integers"},
      {"GemmTunableOp_float_NN", "nn_1_2_99999999999999999999", "integers"},
      {"GemmTunableOp_float_NN", "nn_1_2_3_ld_1_2", "unexpected 'ld'"},
      {"GemmTunableOp_float_NN", "nn_1_2_3_ld_1_x_1", "non-integer after _ld_"},
      {"GemmTunableOp_float_NN", "nn_4_4_4_ld_3_4_4", "lda"},
      {"GemmTunableOp_float_NN", "nn_4_4_4_ld_4_4_2", "ldc"},
      {"GemmTunableOp_float_NN", "nn_1_2_3_X_4", "unexpected 'X'"},
      {"GemmTunableOp_float_NN", "nn_1_2_3_", "nn_1_2_3_"},
      {"GemmTunableOp_float_NN", "nn_1_2_3__B_2", "unexpected ''"},
      {"GemmTunableOp_float_NN", "nn_1_2_3_B_2", "GemmStridedBatchedTunableOp"},
      {"GemmStridedBatchedTunableOp_float_NN", "nn_1_2_3_B_x", "non-integer batch"},
      {"GemmStridedBatchedTunableOp_float_NN", "nn_1_2_3_B_0", "batch"},
      {"GemmStridedBatchedTunableOp_float_NN", "nn_4_4_4_B_2_S_16_16_8", "stride_c"},
      {"GemmTunableOp_double_tf32_NN", "nn_1_2_3", "tf32"},
  };
  for (const auto& c : cases) {
    auto r = parse_gemm_signature(c.op, c.params);
    ASSERT_FALSE(r.is_ok()) << "accepted '" << c.op << "," << c.params << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kParseError) << c.op << "," << c.params;
    const std::string& msg = r.status().message();
    // The message quotes the problem and says what is wrong.
    EXPECT_NE(msg.find("'" + c.op + "," + c.params + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.why), std::string::npos) << c.op << "," << c.params << " -> " << msg;
  }
}

TEST(GemmSignature, ParseIsLenientAboutLetterCase) {
  auto p = parse_gemm_signature("GemmTunableOp_float_TN", "TN_4_5_6");
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(p->transa, 'T');
  EXPECT_EQ(p->transb, 'N');
}

}  // namespace
}  // namespace tunableop
