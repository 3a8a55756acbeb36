// All-reduce params: validation names the bad field, signatures round-trip, bad signatures are
// refused with the problem in the message; the host reference and its error measure.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/all_reduce/reference.h"
#include "tunableop/all_reduce.h"
#include "tunableop/half.h"

namespace tunableop {
namespace {

TEST(AllReduceParams, ValidateNamesTheField) {
  AllReduceParams p;
  p.count = 1024;
  EXPECT_TRUE(p.validate().is_ok());
  p.count = -1;
  EXPECT_NE(p.validate().message().find("count"), std::string::npos);
  p.count = 8;
  p.world_size = 0;
  EXPECT_NE(p.validate().message().find("world_size"), std::string::npos);
  p.world_size = kMaxRanks + 1;
  EXPECT_NE(p.validate().message().find("world_size"), std::string::npos);
}

TEST(AllReduceParams, SignaturesRoundTrip) {
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
    for (int world : {1, 2, 8}) {
      AllReduceParams p;
      p.dtype = t;
      p.count = 4096 * 3 + 1;
      p.world_size = world;
      const std::string op = all_reduce_op_signature(p), params = all_reduce_params_signature(p);
      auto back = parse_all_reduce_signature(op, params);
      ASSERT_TRUE(back.is_ok()) << back.status().to_string();
      EXPECT_EQ(*back, p) << op << "," << params;
    }
  }
  AllReduceParams p;
  p.count = 4096;
  EXPECT_EQ(all_reduce_op_signature(p), "AllReduceTunableOp_BFloat16_sum");
  EXPECT_EQ(all_reduce_params_signature(p), "n_4096_ranks_2");
}

TEST(AllReduceParams, ResidualEpilogueHasItsOwnSignatureAndRules) {
  AllReduceParams p;
  p.dtype = DType::kF32;
  p.count = 4096;
  p.epilogue = AllReduceEpilogue::kAddResidual;
  p.round_to = DType::kBF16;
  ASSERT_TRUE(p.validate().is_ok());
  EXPECT_EQ(all_reduce_params_signature(p), "n_4096_ranks_2_residual_BFloat16");
  EXPECT_EQ(p.output_dtype(), DType::kF32);
  EXPECT_EQ(p.output_bytes(), 4096u * 4);
  auto back = parse_all_reduce_signature(all_reduce_op_signature(p), all_reduce_params_signature(p));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, p);
  // A different problem from the plain sum of the same inputs.
  AllReduceParams plain = p;
  plain.epilogue = AllReduceEpilogue::kNone;
  EXPECT_NE(all_reduce_params_signature(plain), all_reduce_params_signature(p));
  p.round_to = DType::kF64;
  EXPECT_NE(p.validate().message().find("fp64"), std::string::npos);
  for (const char* bad : {"n_8_ranks_2_residual_", "n_8_ranks_2_residual_Int8", "n_8_ranks__residual_float"}) {
    auto q = parse_all_reduce_signature("AllReduceTunableOp_float_sum", bad);
    EXPECT_FALSE(q.is_ok()) << bad;
  }
}

TEST(AllReduceParams, BadSignaturesAreRefusedWithTheProblem) {
  for (auto [op, params] :
       std::vector<std::pair<std::string, std::string>>{{"AllReduceTunableOp_BFloat16_max", "n_8_ranks_2"},
                                                        {"AllReduceTunableOp_Int8_sum", "n_8_ranks_2"},
                                                        {"GemmTunableOp_float_NN", "n_8_ranks_2"},
                                                        {"AllReduceTunableOp_float_sum", "n_8"},
                                                        {"AllReduceTunableOp_float_sum", "n_x_ranks_2"},
                                                        {"AllReduceTunableOp_float_sum", "n_8_ranks_99"},
                                                        {"AllReduceTunableOp_float_sum", "n_-8_ranks_2"}}) {
    auto p = parse_all_reduce_signature(op, params);
    ASSERT_FALSE(p.is_ok()) << op << "," << params;
    EXPECT_NE(p.status().message().find(op + "," + params), std::string::npos) << p.status().message();
  }
}

TEST(AllReduceReference, SumsEveryRankAndMeasuresTheError) {
  AllReduceParams p;
  p.dtype = DType::kF32;
  p.count = 5;
  p.world_size = 3;
  std::vector<float> a = {1, 2, 3, 4, 5}, b = {10, 20, 30, 40, 50}, c = {-1, -2, -3, -4, -5};
  auto ref = ops::all_reduce_reference(p, {a.data(), b.data(), c.data()});
  EXPECT_EQ(ref, (std::vector<double>{10, 20, 30, 40, 50}));
  std::vector<float> good = {10, 20, 30, 40, 50}, off = {10, 20, 30, 40, 51};
  EXPECT_EQ(ops::all_reduce_error(p, good.data(), ref), 0.0);
  EXPECT_GT(ops::all_reduce_error(p, off.data(), ref), ops::all_reduce_tolerance(p));
  off[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(ops::all_reduce_error(p, off.data(), ref)));
  // bf16: one rounding of the sum stays under the tolerance.
  p.dtype = DType::kBF16;
  p.count = 1;
  std::vector<bf16> x = {to_bf16(1.0f)}, y = {to_bf16(0.00390625f * 1.5f)}, sum = {to_bf16(1.0f + 0.005859375f)};
  p.world_size = 2;
  auto r2 = ops::all_reduce_reference(p, {x.data(), y.data()});
  EXPECT_LE(ops::all_reduce_error(p, sum.data(), r2), ops::all_reduce_tolerance(p));
}

}  // namespace
}  // namespace tunableop
