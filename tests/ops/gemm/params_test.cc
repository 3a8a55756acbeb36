// GemmParams: dense defaults, validation messages that name the bad field, operand spans.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu_runtime.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"

namespace tunableop {
namespace {

GemmParams make(char ta, char tb, int64_t m, int64_t n, int64_t k) {
  GemmParams p;
  p.transa = ta;
  p.transb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  return p;
}

::testing::AssertionResult invalid_naming(const Status& st, const std::string& field) {
  if (st.code() != StatusCode::kInvalidArgument)
    return ::testing::AssertionFailure() << "expected invalid argument, got " << st.to_string();
  if (st.message().find(field) == std::string::npos)
    return ::testing::AssertionFailure() << "message does not name '" << field << "': " << st.message();
  return ::testing::AssertionSuccess();
}

TEST(GemmParams, WithDefaultsFillsDenseValues) {
  GemmParams nn = make('N', 'N', 5, 6, 7).with_defaults();
  EXPECT_EQ(nn.lda, 5);
  EXPECT_EQ(nn.ldb, 7);
  EXPECT_EQ(nn.ldc, 5);
  EXPECT_EQ(nn.stride_a, 5 * 7);
  EXPECT_EQ(nn.stride_b, 7 * 6);
  EXPECT_EQ(nn.stride_c, 5 * 6);
  GemmParams tt = make('T', 'T', 5, 6, 7).with_defaults();
  EXPECT_EQ(tt.lda, 7);  // A stored k x m
  EXPECT_EQ(tt.ldb, 6);  // B stored n x k
  EXPECT_EQ(tt.ldc, 5);
  // Explicit values are kept.
  GemmParams given = make('N', 'N', 5, 6, 7);
  given.lda = 9;
  given.ldc = 11;
  GemmParams d = given.with_defaults();
  EXPECT_EQ(d.lda, 9);
  EXPECT_EQ(d.ldc, 11);
  EXPECT_EQ(d.stride_a, 9 * 7);
  EXPECT_EQ(d.stride_c, 11 * 6);
  // Lower case and conjugate transposes are normalized for real types.
  GemmParams lc = make('n', 'c', 2, 2, 2).with_defaults();
  EXPECT_EQ(lc.transa, 'N');
  EXPECT_EQ(lc.transb, 'T');
  EXPECT_TRUE(lc.validate().is_ok());
  // Empty matrices still get legal (>= 1) leading dimensions.
  GemmParams empty = make('N', 'N', 0, 0, 0).with_defaults();
  EXPECT_EQ(empty.lda, 1);
  EXPECT_EQ(empty.ldc, 1);
  EXPECT_TRUE(empty.validate().is_ok());
}

TEST(GemmParams, LeadingDimensionSmallerThanRowsIsRejected) {
  GemmParams p = make('N', 'N', 5, 6, 7).with_defaults();
  p.lda = 4;
  EXPECT_TRUE(invalid_naming(p.validate(), "lda"));
  p = make('T', 'N', 5, 6, 7).with_defaults();  // A stored 7 x 5
  p.lda = 6;
  EXPECT_TRUE(invalid_naming(p.validate(), "lda"));
  p.lda = 7;
  EXPECT_TRUE(p.validate().is_ok());
  p = make('N', 'N', 5, 6, 7).with_defaults();
  p.ldb = 6;
  EXPECT_TRUE(invalid_naming(p.validate(), "ldb"));
  p = make('N', 'T', 5, 6, 7).with_defaults();  // B stored 6 x 7
  p.ldb = 5;
  EXPECT_TRUE(invalid_naming(p.validate(), "ldb"));
  p = make('N', 'N', 5, 6, 7).with_defaults();
  p.ldc = 4;
  EXPECT_TRUE(invalid_naming(p.validate(), "ldc"));
  p.ldc = -3;
  EXPECT_TRUE(invalid_naming(p.validate(), "ldc"));
}

TEST(GemmParams, NegativeSizesAreRejected) {
  EXPECT_TRUE(invalid_naming(make('N', 'N', -1, 2, 3).with_defaults().validate(), "m, n, k"));
  EXPECT_TRUE(invalid_naming(make('N', 'N', 1, -2, 3).with_defaults().validate(), "m, n, k"));
  EXPECT_TRUE(invalid_naming(make('N', 'N', 1, 2, -3).with_defaults().validate(), "m, n, k"));
  GemmParams b = make('N', 'N', 1, 2, 3);
  b.batch = 0;
  EXPECT_TRUE(invalid_naming(b.with_defaults().validate(), "batch"));
  b.batch = -4;
  EXPECT_TRUE(invalid_naming(b.with_defaults().validate(), "batch"));
}

TEST(GemmParams, BadTransposeLettersAreRejected) {
  EXPECT_TRUE(invalid_naming(make('X', 'N', 1, 1, 1).with_defaults().validate(), "transa"));
  EXPECT_TRUE(invalid_naming(make('N', 'Q', 1, 1, 1).with_defaults().validate(), "transb"));
  EXPECT_TRUE(invalid_naming(make('\0', 'N', 1, 1, 1).validate(), "transa"));
}

TEST(GemmParams, OverlappingBatchesOfCAreRejected) {
  GemmParams p = make('N', 'N', 4, 5, 6);
  p.batch = 3;
  p = p.with_defaults();
  ASSERT_TRUE(p.validate().is_ok());
  p.stride_c = 4 * 5 - 1;  // matrix b+1 starts inside matrix b
  EXPECT_TRUE(invalid_naming(p.validate(), "stride_c"));
  p.stride_c = 4 * 5;
  EXPECT_TRUE(p.validate().is_ok());
  p.ldc = 7;
  p.stride_c = 4 * 5;  // dense for ldc 4, overlapping for ldc 7
  EXPECT_TRUE(invalid_naming(p.validate(), "stride_c"));
  p.stride_c = 7 * 5;
  EXPECT_TRUE(p.validate().is_ok());
  p.stride_a = -1;
  EXPECT_TRUE(invalid_naming(p.validate(), "stride"));
  // A single matrix has no batches to overlap.
  GemmParams one = make('N', 'N', 4, 5, 6).with_defaults();
  one.stride_c = 1;
  EXPECT_TRUE(one.validate().is_ok());
}

TEST(GemmParams, Tf32OnlyForFp32) {
  GemmParams p = make('N', 'N', 2, 2, 2);
  p.allow_tf32 = true;
  EXPECT_TRUE(p.with_defaults().validate().is_ok());
  p.dtype = DType::kF64;
  EXPECT_TRUE(invalid_naming(p.with_defaults().validate(), "tf32"));
}

TEST(GemmParams, AWiderCIsFp32ForHalfPrecisionInputsOnly) {
  GemmParams p;
  p.m = p.n = p.k = 4;
  for (DType in : {DType::kBF16, DType::kF16}) {
    p.dtype = in;
    p.out_dtype = DType::kF32;
    EXPECT_TRUE(p.with_defaults().validate().is_ok()) << dtype_name(in);
    p.out_dtype = DType::kF64;
    EXPECT_EQ(p.with_defaults().validate().code(), StatusCode::kInvalidArgument) << dtype_name(in);
  }
  p.dtype = DType::kF32;
  p.out_dtype = DType::kBF16;
  Status st = p.with_defaults().validate();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out_dtype"), std::string::npos) << st.message();
}

TEST(GemmParams, SpansCoverEveryBatchAndGap) {
  GemmParams p = make('N', 'T', 3, 4, 5);
  p.lda = 6;  // A: 3 x 5 stored with ld 6
  p.ldb = 4;  // B: stored 4 x 5
  p.ldc = 8;
  p.batch = 2;
  p.stride_a = 40;
  p.stride_b = 25;
  p.stride_c = 40;
  p = p.with_defaults();
  ASSERT_TRUE(p.validate().is_ok());
  EXPECT_EQ(p.a_span(), 40 + 6 * 4 + 3);
  EXPECT_EQ(p.b_span(), 25 + 4 * 4 + 4);
  EXPECT_EQ(p.c_span(), 40 + 8 * 3 + 3);
  GemmParams dense = make('N', 'N', 3, 4, 5).with_defaults();
  EXPECT_EQ(dense.a_span(), 15);
  EXPECT_EQ(dense.b_span(), 20);
  EXPECT_EQ(dense.c_span(), 12);
  EXPECT_DOUBLE_EQ(dense.flops(), 2.0 * 3 * 4 * 5);
  EXPECT_EQ(make('N', 'N', 0, 4, 5).with_defaults().c_span(), 0);
}

// gemm() checks its arguments before it looks anything up or runs anything.
TEST(GemmParams, GemmRejectsBadArgumentsBeforeRunning) {
  int runs = 0;
  Context ctx(Device::cpu(), Config::defaults_only(), [&runs](Registry& r) {
    register_cpu_runtime(r);
    GemmCandidate def;
    def.name = "Default";
    def.supports = [](const GemmParams&) { return Status::ok(); };
    def.run = [&runs](const GemmParams&, const GemmOperands&) {
      ++runs;
      return Status::ok();
    };
    r.list<GemmCandidate>().push_back(def);
  });
  std::vector<float> a(64, 1.f), b(64, 1.f), c(64, 0.f);
  GemmOperands ops{a.data(), b.data(), c.data()};
  GemmParams p = make('N', 'N', 4, 4, 4);
  p.lda = 2;
  EXPECT_TRUE(invalid_naming(gemm(ctx, p, ops), "lda"));
  EXPECT_TRUE(invalid_naming(gemm(ctx, make('N', 'N', -4, 4, 4), ops), "m, n, k"));
  EXPECT_TRUE(invalid_naming(gemm(ctx, make('Z', 'N', 4, 4, 4), ops), "transa"));
  EXPECT_TRUE(invalid_naming(gemm(ctx, make('N', 'N', 4, 4, 4), GemmOperands{nullptr, b.data(), c.data()}), "null"));
  EXPECT_TRUE(invalid_naming(gemm(ctx, make('N', 'N', 4, 4, 4), GemmOperands{a.data(), b.data(), nullptr}), "null"));
  EXPECT_EQ(runs, 0);
  // Empty problems are legal and do nothing.
  EXPECT_TRUE(gemm(ctx, make('N', 'N', 0, 4, 4), GemmOperands{}).is_ok());
  EXPECT_TRUE(gemm(ctx, make('N', 'N', 4, 0, 4), GemmOperands{}).is_ok());
  EXPECT_EQ(runs, 0);
  // k == 0 with beta == 0 still writes C (to zeros), so it runs; A and B may be null.
  EXPECT_TRUE(gemm(ctx, make('N', 'N', 4, 4, 0), GemmOperands{nullptr, nullptr, c.data()}).is_ok());
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace tunableop
