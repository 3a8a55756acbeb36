// A ProcessGroup whose "processes" are threads of the test: what the multi-process all-reduce
// and engine run on in unit tests (the CLI's MPI group is tested end to end under mpirun).
// ThreadGroupHub::group(r) is rank r's end; each rank's thread makes the same calls in the same
// order, as MPI ranks would. abort() breaks the hub: every later call fails, as every process
// of an aborted MPI job ends. A call that times out leaves the hub unusable for its caller,
// which is expected to abort.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tunableop/process_group.h"

namespace tunableop::testing {

class ThreadGroupHub {
 public:
  explicit ThreadGroupHub(int size) : size_(size), slots_(size_t(size)) {
    for (int r = 0; r < size; ++r) ends_.push_back(std::make_unique<End>(*this, r));
  }
  ProcessGroup& group(int rank) { return *ends_[size_t(rank)]; }
  // When this hub breaks, `other` breaks too (two groups of the same processes: an MPI job that
  // ends ends both).
  void also_break(ThreadGroupHub* other) { linked_ = other; }
  int size() const { return size_; }
  // Why the hub broke (ok while it works).
  Status broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

 private:
  struct Slot {
    const void* send = nullptr;
    void* recv = nullptr;
  };

  class End final : public ProcessGroup {
   public:
    End(ThreadGroupHub& hub, int rank) : hub_(hub), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return hub_.size_; }
    std::string describe() const override {
      return "thread rank " + std::to_string(rank_) + " of " + std::to_string(hub_.size_);
    }
    Status broadcast(void* data, size_t bytes, int root) override {
      return hub_.exchange(rank_, data, data, kForever, [&](std::vector<Slot>& s) {
        for (int q = 0; q < hub_.size_; ++q)
          if (q != root) std::memcpy(s[size_t(q)].recv, s[size_t(root)].send, bytes);
      });
    }
    Status all_gather(const void* mine, void* all, size_t bytes, double timeout_s) override {
      return hub_.exchange(rank_, mine, all, timeout_s, [&](std::vector<Slot>& s) {
        for (int q = 0; q < hub_.size_; ++q)
          for (int from = 0; from < hub_.size_; ++from)
            std::memcpy(static_cast<char*>(s[size_t(q)].recv) + size_t(from) * bytes, s[size_t(from)].send, bytes);
      });
    }
    Status gather(const void* mine, void* all, size_t bytes, int root) override {
      return hub_.exchange(rank_, mine, all, kForever, [&](std::vector<Slot>& s) {
        for (int from = 0; from < hub_.size_; ++from)
          std::memcpy(static_cast<char*>(s[size_t(root)].recv) + size_t(from) * bytes, s[size_t(from)].send, bytes);
      });
    }
    Status all_to_all(const void* send, void* recv, size_t bytes) override {
      return hub_.exchange(rank_, send, recv, kForever, [&](std::vector<Slot>& s) {
        for (int q = 0; q < hub_.size_; ++q)
          for (int from = 0; from < hub_.size_; ++from)
            std::memcpy(static_cast<char*>(s[size_t(q)].recv) + size_t(from) * bytes,
                        static_cast<const char*>(s[size_t(from)].send) + size_t(q) * bytes, bytes);
      });
    }
    void abort(const Status& why) override { hub_.fail(Status(why.code(), describe() + " aborted: " + why.message())); }

   private:
    ThreadGroupHub& hub_;
    int rank_;
  };

  void fail(const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!broken_.is_ok()) return;
      broken_ = why;
      cv_.notify_all();
    }
    if (linked_) linked_->fail(why);
  }

  // Every rank publishes its buffers; the last to arrive moves the data for all of them; every
  // rank leaves once it has. A rank waiting past its timeout breaks the hub.
  template <class Move>
  Status exchange(int rank, const void* send, void* recv, double timeout_s, Move&& move) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!broken_.is_ok()) return broken_;
    const uint64_t gen = generation_;
    slots_[size_t(rank)] = {send, recv};
    if (++arrived_ == size_) {
      move(slots_);
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::ok();
    }
    auto done = [&] { return generation_ != gen || !broken_.is_ok(); };
    if (timeout_s == ProcessGroup::kForever) {
      cv_.wait(lock, done);
    } else if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), done)) {
      // As an MPI rank gives up a request: the group is unusable, and the caller ends the job.
      return Status::unavailable("thread rank " + std::to_string(rank) + ": the other ranks did not arrive");
    }
    return generation_ != gen ? Status::ok() : broken_;
  }

  int size_;
  std::vector<std::unique_ptr<End>> ends_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  Status broken_;
  ThreadGroupHub* linked_ = nullptr;
};

}  // namespace tunableop::testing
