// status_boundary: whatever escapes a public entry point's body becomes a Status naming the
// input; nothing passes through as an exception (the design's "no abort in library code").
#include "tunableop/status_boundary.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace tunableop {
namespace {

TEST(StatusBoundary, PassesResultsThrough) {
  int described = 0;
  auto describe = [&] {
    ++described;
    return std::string("gemm nn_1_1_1");
  };
  EXPECT_TRUE(status_boundary(describe, [] { return Status::ok(); }).is_ok());
  StatusOr<int> v = status_boundary(describe, []() -> StatusOr<int> { return 7; });
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(*v, 7);
  Status bad = status_boundary(describe, [] { return Status::invalid_argument("lda"); });
  EXPECT_EQ(bad.message(), "lda");
  EXPECT_EQ(described, 0) << "the description is built only when something was thrown";
}

TEST(StatusBoundary, TurnsExceptionsIntoStatusesNamingTheInput) {
  auto describe = [] { return std::string("loading the model in /m"); };
  Status oom = status_boundary(describe, []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(oom.code(), StatusCode::kInternal);
  EXPECT_EQ(oom.message(), "loading the model in /m: out of memory");
  StatusOr<int> len = status_boundary(describe, []() -> StatusOr<int> {
    std::vector<int> v;
    v.reserve(v.max_size() + 1);  // std::length_error
    return 1;
  });
  ASSERT_FALSE(len.is_ok());
  EXPECT_EQ(len.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(len.status().message().find("loading the model in /m: a size is too large"), std::string::npos);
  Status other = status_boundary(describe, []() -> Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(other.message(), "loading the model in /m: boom");
  Status unknown = status_boundary(describe, []() -> Status { throw 42; });
  EXPECT_EQ(unknown.message(), "loading the model in /m: unknown exception");
}

}  // namespace
}  // namespace tunableop
