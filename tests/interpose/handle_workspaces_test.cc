// The table of workspaces programs set on cuBLAS handles (the preload library's; no CUDA needed).
#include "interpose/handle_workspaces.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace tunableop::interpose::preload::handle_workspaces {
namespace {

const void* handle(uintptr_t i) { return reinterpret_cast<const void*>(0x7f0000001000 + 0x40 * i); }
void* buffer(uintptr_t i) { return reinterpret_cast<void*>(0x500000000 + 0x1000 * i); }

TEST(HandleWorkspaces, SetGetResetForget) {
  clear_all();
  void* p = nullptr;
  size_t n = 0;
  EXPECT_FALSE(get(handle(1), &p, &n));
  set(handle(1), buffer(1), 4096);
  ASSERT_TRUE(get(handle(1), &p, &n));
  EXPECT_EQ(p, buffer(1));
  EXPECT_EQ(n, 4096u);
  reset(handle(1));  // cublasSetStream: back to cuBLAS's own pool
  EXPECT_FALSE(get(handle(1), &p, &n));
  EXPECT_EQ(n, 0u);
  set(handle(1), buffer(2), 8192);
  ASSERT_TRUE(get(handle(1), &p, &n));
  EXPECT_EQ(p, buffer(2));
  forget(handle(1));
  EXPECT_FALSE(get(handle(1), &p, &n));
  set(handle(1), nullptr, 100);  // a null workspace is "none"
  EXPECT_FALSE(get(handle(1), &p, &n));
}

TEST(HandleWorkspaces, ManyHandlesStayApartAndAFullTableMeansUnknown) {
  clear_all();
  const uintptr_t count = 3000;  // more than the table holds
  for (uintptr_t i = 0; i < count; ++i) set(handle(i), buffer(i), 64 + i);
  int known = 0;
  for (uintptr_t i = 0; i < count; ++i) {
    void* p = nullptr;
    size_t n = 0;
    if (get(handle(i), &p, &n)) {
      ++known;
      EXPECT_EQ(p, buffer(i));
      EXPECT_EQ(n, 64 + i);
    }
  }
  EXPECT_GE(known, 1000);
  EXPECT_LT(known, int(count));
  // Destroyed handles free their slots for new ones.
  for (uintptr_t i = 0; i < count; ++i) forget(handle(i));
  set(handle(count + 1), buffer(1), 1);
  void* p = nullptr;
  size_t n = 0;
  EXPECT_TRUE(get(handle(count + 1), &p, &n));
  clear_all();
}

TEST(HandleWorkspaces, OneHandlePerThreadConcurrently) {
  clear_all();
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (uintptr_t t = 0; t < 8; ++t) {
    threads.emplace_back([t, &wrong] {
      for (uintptr_t i = 0; i < 2000; ++i) {
        set(handle(t), buffer(i), 100 + i);
        void* p = nullptr;
        size_t n = 0;
        if (!get(handle(t), &p, &n) || p != buffer(i) || n != 100 + i) ++wrong[t];
        reset(handle(t));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
  clear_all();
}

}  // namespace
}  // namespace tunableop::interpose::preload::handle_workspaces
