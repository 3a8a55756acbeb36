// serve/channel_waker.h and Channel's append/wake: a reader asleep in take() sees tokens that
// were appended only once the waker wakes it (well before its timeout); every posted wake-up is
// delivered, also the ones still queued when the waker is destroyed; tokens arrive in order
// through many steps while the readers sleep between them (the runtime's pattern).
#include "serve/channel_waker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tunableop::serve {
namespace {

using std::chrono::milliseconds;

TEST(Channel, AppendDoesNotWakeAndWakeDoes) {
  Channel ch;
  std::atomic<bool> got{false};
  std::thread reader([&] {
    Channel::Update u = ch.take(milliseconds(20000));
    got = !u.tokens.empty();
  });
  std::this_thread::sleep_for(milliseconds(50));  // the reader is asleep in take()
  ch.append(5);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(got.load()) << "append() alone woke the reader";
  const auto t0 = Clock::now();
  ch.wake();
  reader.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(Clock::now() - t0, milliseconds(10000));
}

TEST(ChannelWaker, WakesEveryPostedReader) {
  constexpr int kReaders = 16;
  std::vector<std::shared_ptr<Channel>> channels;
  for (int i = 0; i < kReaders; ++i) channels.push_back(std::make_shared<Channel>());
  std::atomic<int> woken{0};
  std::vector<std::thread> readers;
  for (auto& c : channels) {
    readers.emplace_back([&woken, c] {
      if (!c->take(milliseconds(20000)).tokens.empty()) ++woken;
    });
  }
  std::this_thread::sleep_for(milliseconds(50));
  const auto t0 = Clock::now();
  {
    ChannelWaker waker;
    std::vector<std::shared_ptr<Channel>> batch;
    for (auto& c : channels) {
      c->append(1);
      batch.push_back(c);
    }
    waker.post(&batch);
    EXPECT_TRUE(batch.empty());
  }  // destroyed at once: what was posted is still woken
  for (auto& r : readers) r.join();
  EXPECT_EQ(woken.load(), kReaders);
  EXPECT_LT(Clock::now() - t0, milliseconds(10000));
}

TEST(ChannelWaker, StepsOfTokensArriveInOrder) {
  constexpr int kReaders = 8, kSteps = 300;
  std::vector<std::shared_ptr<Channel>> channels;
  for (int i = 0; i < kReaders; ++i) channels.push_back(std::make_shared<Channel>());
  std::vector<std::vector<int32_t>> seen(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      for (;;) {
        Channel::Update u = channels[size_t(i)]->take(milliseconds(20000));
        seen[size_t(i)].insert(seen[size_t(i)].end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) return;
      }
    });
  }
  {
    ChannelWaker waker;
    std::vector<std::shared_ptr<Channel>> batch;
    for (int step = 0; step < kSteps; ++step) {
      for (auto& c : channels) {
        c->append(step);
        batch.push_back(c);
      }
      waker.post(&batch);
      if (step % 50 == 0) std::this_thread::sleep_for(milliseconds(1));
    }
    for (auto& c : channels) c->finish(FinishReason::kLength);
  }
  for (auto& r : readers) r.join();
  for (const auto& s : seen) {
    ASSERT_EQ(s.size(), size_t(kSteps));
    for (int step = 0; step < kSteps; ++step) EXPECT_EQ(s[size_t(step)], step);
  }
}

}  // namespace
}  // namespace tunableop::serve
