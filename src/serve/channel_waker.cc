#include "serve/channel_waker.h"

namespace tunableop::serve {

ChannelWaker::ChannelWaker() : thread_([this] { run(); }) {}

ChannelWaker::~ChannelWaker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void ChannelWaker::post(std::vector<std::shared_ptr<Channel>>* channels) {
  if (channels->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) {
      pending_.swap(*channels);
    } else {
      pending_.insert(pending_.end(), channels->begin(), channels->end());
      channels->clear();
    }
  }
  cv_.notify_one();
}

void ChannelWaker::run() {
  std::vector<std::shared_ptr<Channel>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing left to wake
      batch.swap(pending_);
    }
    for (const auto& c : batch) c->wake();
    batch.clear();  // drops the references outside the lock; the capacity stays with `batch`
  }
}

}  // namespace tunableop::serve
