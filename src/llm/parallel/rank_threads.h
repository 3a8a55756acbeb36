// One persistent host thread per rank of the tensor-parallel engine: a step runs on every
// rank's thread at once (each keeps its GPU current and captures its own CUDA graph), and the
// caller waits for all of them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

class RankThreads {
 public:
  explicit RankThreads(int ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  // Runs job(r) on rank r's thread for every rank, returns when all are done: the lowest
  // rank's error, if any. `on_error` is told of each failure as it happens (to release ranks
  // that wait for the failed one).
  Status run(const std::function<Status(int rank)>& job, const std::function<void(const Status&)>& on_error = {});

 private:
  void loop(int rank);
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<Status(int)>* job_ = nullptr;
  const std::function<void(const Status&)>* on_error_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<Status> results_;
};

}  // namespace tunableop::llm
