// Wakes the readers of request channels on a thread of its own. The runtime's loop appends a
// step's tokens to their channels (Channel::append) and posts the channels here: the wake-ups
// (a futex call each when the reader sleeps, which it does between tokens) then overlap the next
// engine step instead of preceding it. 256 of them took 2.2 ms on the 2-core development VM
// (bench/serve_turn_bench.cc, the loop's side); on the H200 host the loop's whole turn between
// two steps at 256 running was 0.69 ms (docs/results/serve/h200-2026-11-28.md).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/request.h"

namespace tunableop::serve {

class ChannelWaker {
 public:
  ChannelWaker();
  // Wakes whatever was posted, then stops.
  ~ChannelWaker();
  ChannelWaker(const ChannelWaker&) = delete;
  ChannelWaker& operator=(const ChannelWaker&) = delete;

  // Queues the channels' wake-ups; `channels` is left empty (its capacity kept for reuse).
  void post(std::vector<std::shared_ptr<Channel>>* channels);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Channel>> pending_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tunableop::serve
