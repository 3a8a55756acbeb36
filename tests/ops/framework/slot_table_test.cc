// The lock-free slot table and the hashed problem key under the plan hot path.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "ops/framework/problem_key.h"
#include "ops/framework/slot_table.h"
#include "tunableop/op.h"

namespace tunableop::ops {
namespace {

struct TestSlot {
  TestSlot(const ProblemKey& k, uint64_t h) : key(k), hash(h) {}
  ProblemKey key;
  uint64_t hash;
};

TEST(ProblemKey, EqualityHashAndCapacity) {
  ProblemKey a{1, 2, 3}, b{1, 2, 3}, c{1, 2, 4}, shorter{1, 2};
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_FALSE(a == shorter);
  ProblemKey full;
  for (size_t i = 0; i < ProblemKey::kCapacity; ++i) full.add(int64_t(i));
  EXPECT_TRUE(full.valid());
  full.add(99);
  EXPECT_FALSE(full.valid()) << "a key that does not fit is refused, never truncated";
}

TEST(SlotTable, FindsWhatWasInsertedAcrossGrowth) {
  SlotTable<TestSlot> table;
  auto make = [](const ProblemKey& k, uint64_t h) { return std::make_unique<TestSlot>(k, h); };
  std::vector<TestSlot*> slots;
  for (int64_t i = 0; i < 1000; ++i) {
    ProblemKey k{i, i * 7};
    slots.push_back(&table.find_or_insert(k, k.hash(), make));
  }
  EXPECT_EQ(table.size(), 1000u);
  for (int64_t i = 0; i < 1000; ++i) {
    ProblemKey k{i, i * 7};
    EXPECT_EQ(table.find(k, k.hash()), slots[size_t(i)]) << "slots never move";
    EXPECT_EQ(&table.find_or_insert(k, k.hash(), make), slots[size_t(i)]);
  }
  ProblemKey absent{-1, -1};
  EXPECT_EQ(table.find(absent, absent.hash()), nullptr);
}

TEST(SlotTable, ConcurrentReadersAndWritersAgree) {
  SlotTable<TestSlot> table;
  auto make = [](const ProblemKey& k, uint64_t h) { return std::make_unique<TestSlot>(k, h); };
  std::vector<std::thread> threads;
  std::vector<std::vector<TestSlot*>> seen(4);
  for (size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < 500; ++i) {
        ProblemKey k{i % 300};  // overlapping keys: the same slot for every thread
        seen[t].push_back(&table.find_or_insert(k, k.hash(), make));
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.size(), 300u);
  for (size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t], seen[0]);
}

TEST(CandidateInfo, DescribesWithoutParsingNames) {
  CandidateInfo info{"cuBLASLt", "algo", {}};
  info.add("algo", "66").add("tile", "23");
  EXPECT_EQ(info.get("tile"), "23");
  EXPECT_EQ(info.get("stages"), "");
  EXPECT_EQ(info.family(), "cuBLASLt algo");
  EXPECT_EQ(info.to_string(), "cuBLASLt algo (algo=66, tile=23)");
  EXPECT_EQ((CandidateInfo{"OpenBLAS", "", {}}).family(), "OpenBLAS");
}

}  // namespace
}  // namespace tunableop::ops
