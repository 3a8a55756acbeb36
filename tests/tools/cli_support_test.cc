// tools/cli_support: option checks, --gpus lists, terminal-safe printing.
#include "cli_support.h"

#include <gtest/gtest.h>

namespace tunableop::cli {
namespace {

TEST(CliSupport, PrintableEscapesControlBytesAndBadUtf8) {
  EXPECT_EQ(printable("Gemm_Openblas_t2"), "Gemm_Openblas_t2");
  EXPECT_EQ(printable("\x1b[2J\x1b]0;pwned\x07"), "\\x1b[2J\\x1b]0;pwned\\x07");
  EXPECT_EQ(printable("a\rb\nc\td\x7f"), "a\\x0db\\x0ac\\x09d\\x7f");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash") << "unambiguous: a literal \\x1b cannot pass as ESC";
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82");
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b") << "C1 control (8-bit CSI) in UTF-8";
  EXPECT_EQ(printable("\x9b"), "\\x9b") << "a raw 8-bit CSI byte";
  EXPECT_EQ(printable("\xc3"), "\\xc3") << "truncated sequence";
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "surrogate";
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf") << "overlong";
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
}

TEST(CliSupport, GpuListsAreCheckedNotThrown) {
  auto ok = parse_gpu_list("0,2,3");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, (std::vector<int>{0, 2, 3}));
  for (const char* bad : {"abc", "0,,1", "", "1,", "-1", "0x1", "99999999999", "1 ,2"}) {
    auto r = parse_gpu_list(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("is not a GPU ordinal"), std::string::npos) << r.status().message();
  }
}

TEST(CliSupport, AtLeastSaysWhatIsWrongPlainly) {
  CLI::Validator v = at_least(1);
  std::string zero = "0", one = "1", minus = "-5", big = "9223372036854775807", word = "abc";
  EXPECT_EQ(v(zero), "must be >= 1 (got 0)");
  EXPECT_EQ(v(one), "");
  EXPECT_EQ(v(minus), "must be >= 1 (got -5)");
  EXPECT_EQ(v(big), "");
  EXPECT_EQ(v(word), "") << "left to CLI11's conversion error";
}

}  // namespace
}  // namespace tunableop::cli
