// CheckedInt, checked_bytes, parse_int64 and the host-memory limit: the arithmetic every size
// computed from user input goes through.
#include "tunableop/checked_size.h"

#include <gtest/gtest.h>

#include <limits>

namespace tunableop {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(CheckedInt, PlainArithmeticWhenInRange) {
  CheckedInt span = (CheckedInt(4) - 1) * 100 + CheckedInt(7) * (9 - 1) + 7;
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span.value(), 363);
  EXPECT_EQ(*span.get(), 363);
}

TEST(CheckedInt, OverflowIsStickyAndSaturatesForDisplay) {
  // The case: ldc = 2^62 times 63 columns wraps in plain int64 arithmetic.
  CheckedInt c = CheckedInt(int64_t(1) << 62) * 63 + 64;
  EXPECT_FALSE(c.ok());
  EXPECT_FALSE(c.get().has_value());
  EXPECT_EQ(c.value(), kMax);
  EXPECT_FALSE((c - kMax + 1).ok()) << "nothing brings an overflowed value back";
  EXPECT_FALSE((CheckedInt(kMax) + 1).ok());
  EXPECT_FALSE((CheckedInt(kMin) - 1).ok());
  EXPECT_FALSE((CheckedInt(kMin) * -1).ok());
  EXPECT_FALSE((CheckedInt(int64_t(1) << 58) * (int64_t(1) << 6)).ok());
  EXPECT_TRUE((CheckedInt(int64_t(1) << 58) * (int64_t(1) << 4)).ok());
  CheckedInt acc = 1;
  for (int i = 0; i < 70; ++i) acc *= 2;
  EXPECT_FALSE(acc.ok());
}

TEST(CheckedBytes, FitsSizeAndPtrdiff) {
  EXPECT_EQ(checked_bytes(10, 4), size_t(40));
  EXPECT_EQ(checked_bytes(0, 8), size_t(0));
  EXPECT_FALSE(checked_bytes(-1, 4).has_value());
  EXPECT_FALSE(checked_bytes(kMax, 2).has_value());
  EXPECT_FALSE(checked_bytes(kMax / 4 + 1, 8).has_value()) << "more than PTRDIFF_MAX bytes";
  EXPECT_TRUE(checked_bytes(kMax / 8, 8).has_value());
}

TEST(ParseInt64, WholeDecimalNumbersOnly) {
  int64_t v = -7;
  EXPECT_TRUE(parse_int64("4611686018427387904", &v));
  EXPECT_EQ(v, int64_t(1) << 62);
  EXPECT_TRUE(parse_int64("+12", &v));
  EXPECT_EQ(v, 12);
  EXPECT_TRUE(parse_int64("-3", &v));
  EXPECT_EQ(v, -3);
  EXPECT_TRUE(parse_int64("9223372036854775807", &v));
  EXPECT_EQ(v, kMax);
  v = 5;
  for (const char* bad : {"", "+", "-", "+-1", "1e12", "0x10", " 1", "1 ", "12a", "9223372036854775808",
                          "99999999999999999999", "abc", "1.5"}) {
    EXPECT_FALSE(parse_int64(bad, &v)) << bad;
    EXPECT_EQ(v, 5) << "untouched on failure: " << bad;
  }
  EXPECT_FALSE(parse_int64("-1", &v, 0)) << "below the lower bound";
  EXPECT_FALSE(parse_int64("11", &v, 0, 10)) << "above the upper bound";
  EXPECT_TRUE(parse_int64("10", &v, 0, 10));
}

TEST(HostAllocation, LimitIsThisMachinesMemory) {
  const uint64_t mem = host_memory_bytes();
  EXPECT_GT(mem, uint64_t(64) << 20) << "at least 64 MiB on any machine that runs the tests";
  EXPECT_TRUE(check_host_allocation(uint64_t(1) << 20, "a small buffer").is_ok());
  Status st = check_host_allocation(mem + 1, "the operands of nn_1_2_3");
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("the operands of nn_1_2_3 needs "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("more than this machine's memory"), std::string::npos) << st.message();
  Status over = check_host_allocation(CheckedInt(kMax) * 4, "a wrapped size");
  ASSERT_FALSE(over.is_ok());
  EXPECT_NE(over.message().find("overflows"), std::string::npos) << over.message();
}

// What tuning and the CLI count before allocating (issue 33): what is available now, not the
// machine's total (a program holding 10 GiB was OOM-killed by tuning copies checked against it).
TEST(AvailableMemory, MemAvailableLoweredByTheCgroupAndTheAddressSpaceLimit) {
  const std::string meminfo = "MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   16000000 kB\n";
  EXPECT_EQ(available_memory_from(meminfo, "", "", "", 0, 0), uint64_t(16000000) * 1024);
  // cgroup v2: 8 GiB limit, 6 GiB used of which 1 GiB is page cache it can drop: 3 GiB left.
  const uint64_t gib = uint64_t(1) << 30;
  EXPECT_EQ(available_memory_from(meminfo, "8589934592\n", std::to_string(6 * gib),
                                  "anon 5\ninactive_file 1073741824\n", 0, 0),
            3 * gib);
  // cgroup v1's names; "max" (v2 without a limit) is no limit.
  EXPECT_EQ(
      available_memory_from(meminfo, std::to_string(8 * gib), std::to_string(7 * gib), "total_inactive_file 0\n", 0, 0),
      gib);
  EXPECT_EQ(available_memory_from(meminfo, "max\n", "123", "", 0, 0), uint64_t(16000000) * 1024);
  // A cgroup over its limit, and RLIMIT_AS: what the address space still has room for.
  EXPECT_EQ(available_memory_from(meminfo, std::to_string(gib), std::to_string(2 * gib), "", 0, 0), 0u);
  EXPECT_EQ(available_memory_from(meminfo, "", "", "", 5 * gib, 4 * gib), gib);
  // The live value is at most the machine's memory, and refuses what it cannot hold.
  EXPECT_LE(available_host_memory_bytes(), host_memory_bytes());
  Status st = check_available_memory(
      CheckedInt(int64_t(available_host_memory_bytes() / 2 + host_memory_bytes() / 2 + (uint64_t(1) << 20))),
      "a buffer");
  EXPECT_FALSE(st.is_ok());
}

TEST(FormatBytes, HumanUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(uint64_t(3) << 30), "3.0 GiB");
  EXPECT_EQ(format_bytes(uint64_t(1) << 50), "1.0 PiB");
}

}  // namespace
}  // namespace tunableop
