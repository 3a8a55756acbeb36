#include "llm/parallel/rank_threads.h"

namespace tunableop::llm {

RankThreads::RankThreads(int ranks) : results_(size_t(ranks)) {
  for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) t.join();
}

Status RankThreads::run(const std::function<Status(int)>& job, const std::function<void(const Status&)>& on_error) {
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &job;
  on_error_ = on_error ? &on_error : nullptr;
  pending_ = int(threads_.size());
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  for (const Status& s : results_)
    if (!s.is_ok()) return s;
  return Status::ok();
}

void RankThreads::loop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<Status(int)>* job = nullptr;
    const std::function<void(const Status&)>* on_error = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      on_error = on_error_;
    }
    Status st = (*job)(rank);
    if (!st.is_ok() && on_error) (*on_error)(st);
    std::lock_guard<std::mutex> lock(mu_);
    results_[size_t(rank)] = std::move(st);
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace tunableop::llm
