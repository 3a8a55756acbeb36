// The prefill MLP variants (src/llm/cuda/prefill_mlp.h): which row chunks each prompt length
// gets, and that a variant runs every row's GEMM and activation exactly once, the activation
// of a chunk after its GEMM. No GPU needed (the callbacks record what would run); the
// activation's row order is checked on the GPU in kernels_test.cc.
#include "llm/cuda/prefill_mlp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tunableop::llm::cuda {
namespace {

TEST(PrefillMlp, VariantsSplitRowsIntoEvenChunksOfAtLeast256) {
  auto chunks = [](int64_t rows) {
    std::string s;
    for (const MlpVariant& v : mlp_variants(rows)) s += std::to_string(v.chunks) + (v.reverse ? "r " : " ");
    return s;
  };
  EXPECT_EQ(chunks(2048), "1 1r 2 2r 4 4r ");
  EXPECT_EQ(chunks(512), "1 1r 2 2r ");  // 4 chunks of 128: too small
  EXPECT_EQ(chunks(37), "1 1r ");
  EXPECT_EQ(chunks(1000), "1 1r ");  // 500 rows is not a multiple of 64
  EXPECT_EQ(MlpVariant({4, true}).name(), "rows/4 last-first");
  EXPECT_EQ(MlpVariant{}.name(), "rows in order");
}

TEST(PrefillMlp, EveryRowOnceEachChunksActivationAfterItsGemm) {
  for (const MlpVariant& v : mlp_variants(2048)) {
    std::vector<int> gemm_rows(2048, 0), act_rows(2048, 0);
    std::string order;
    auto gemm = [&](int64_t r0, int64_t n) {
      for (int64_t r = r0; r < r0 + n; ++r) ++gemm_rows[size_t(r)];
      order += "g" + std::to_string(r0);
      return Status::ok();
    };
    auto act = [&](int64_t r0, int64_t n, bool reverse) {
      EXPECT_EQ(reverse, v.reverse);
      for (int64_t r = r0; r < r0 + n; ++r) {
        EXPECT_EQ(gemm_rows[size_t(r)], 1) << "row " << r << " activated before its GEMM";
        ++act_rows[size_t(r)];
      }
      order += "a" + std::to_string(r0);
      return Status::ok();
    };
    ASSERT_TRUE(run_mlp_variant(v, 2048, gemm, act).is_ok()) << v.name();
    for (int64_t r = 0; r < 2048; ++r) ASSERT_TRUE(gemm_rows[size_t(r)] == 1 && act_rows[size_t(r)] == 1) << r;
    const std::string want = v.chunks == 1   ? "g0a0"
                             : v.chunks == 2 ? "g0a0g1024a1024"
                                             : "g0a0g512a512g1024a1024g1536a1536";
    EXPECT_EQ(order, want) << v.name();
  }
  // A failing GEMM stops the variant; a split that does not divide the rows is an error.
  int calls = 0;
  auto failing = [&](int64_t, int64_t) { return ++calls == 2 ? Status::device_error("boom") : Status::ok(); };
  auto act = [](int64_t, int64_t, bool) { return Status::ok(); };
  EXPECT_EQ(run_mlp_variant({4, false}, 2048, failing, act).code(), StatusCode::kDeviceError);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(run_mlp_variant({3, false}, 2048, failing, act).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunableop::llm::cuda
