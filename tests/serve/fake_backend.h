// A Backend for the front end's tests: each request gets a thread that streams its scripted ids
// (by default a function of the prompt, max_tokens of them) with an optional delay per token,
// honours cancel() at the next token (counting it, as the runtime frees the pages), and can be
// told to refuse submissions, fail mid-way, or delay its first token.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/request.h"

namespace tunableop::serve::testing {

class FakeBackend final : public Backend {
 public:
  // The ids a request streams at most (max_tokens cuts them: kLength); ending earlier finishes
  // with kStop, like EOS.
  std::function<std::vector<int32_t>(const GenerationRequest&)> script;
  std::chrono::milliseconds token_delay{0};
  std::chrono::milliseconds first_token_delay{0};
  Status submit_error;         // not ok: submit() answers it
  int fail_after_tokens = -1;  // >= 0: finish with `failure` after that many tokens
  Status failure = Status::device_error("fault injected by the test");
  int64_t vocab = 1000, context = 512;
  bool ready = true;

  // The greedy ids of the default script: a function of the prompt only.
  static std::vector<int32_t> default_ids(const std::vector<int32_t>& prompt, int64_t n, int64_t vocab) {
    int64_t h = 0;
    for (int32_t id : prompt) h = (h * 31 + id) % vocab;
    std::vector<int32_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(int32_t((h + 7 * i + 3) % vocab));
    return out;
  }

  ~FakeBackend() override { join(); }

  StatusOr<std::shared_ptr<Channel>> submit(GenerationRequest r) override {
    if (!submit_error.is_ok()) {
      ++rejected_;
      return submit_error;
    }
    if (draining_) return Status::unavailable("draining");
    auto ch = std::make_shared<Channel>();
    std::vector<int32_t> ids = script ? script(r) : default_ids(r.prompt, r.max_tokens, vocab);
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(r);
      ++running_;
      threads_.emplace_back([this, ch, ids = std::move(ids), r] { stream(*ch, ids, r); });
    }
    return ch;
  }

  RuntimeStats stats() const override {
    RuntimeStats s;
    s.ready = ready;
    s.draining = draining_;
    s.requests_running = running_;
    s.kv_pages_used = running_;  // one page a request
    s.kv_pages_total = 64;
    s.kv_page_size = 16;
    s.requests_cancelled = cancelled_;
    s.requests_rejected = rejected_;
    s.generation_tokens = generated_;
    std::lock_guard<std::mutex> lock(mu_);
    s.ttft = ttft_;
    return s;
  }
  int64_t vocab_size() const override { return vocab; }
  int64_t max_context() const override { return context; }

  void drain(std::chrono::milliseconds grace) override {
    draining_ = true;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (running_ > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    cancel_all_ = true;
    join();
  }

  // The requests submitted so far.
  std::vector<GenerationRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int64_t running() const { return running_; }
  int64_t cancelled() const { return cancelled_; }

  // Waits until no request runs (true) or `timeout` passes.
  bool wait_idle(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running_ > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

 private:
  // Sleeps `d` in small steps; false when the request was cancelled meanwhile.
  bool sleep_checking(Channel& ch, std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    do {
      if (ch.cancelled() || cancel_all_) return false;
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(d, std::chrono::milliseconds(2)));
    } while (std::chrono::steady_clock::now() < until);
    return !(ch.cancelled() || cancel_all_);
  }

  void stream(Channel& ch, const std::vector<int32_t>& ids, const GenerationRequest& r) {
    const int64_t n = std::min<int64_t>(int64_t(ids.size()), r.max_tokens);
    FinishReason reason = int64_t(ids.size()) > r.max_tokens ? FinishReason::kLength : FinishReason::kStop;
    if (int64_t(ids.size()) == r.max_tokens) reason = FinishReason::kLength;
    bool cancelled = !sleep_checking(ch, first_token_delay);
    for (int64_t i = 0; i < n && !cancelled; ++i) {
      if (i == fail_after_tokens) {
        ch.finish(FinishReason::kError, failure);
        --running_;
        return;
      }
      if (i > 0 && !sleep_checking(ch, token_delay)) {
        cancelled = true;
        break;
      }
      if (ch.cancelled() || cancel_all_) {
        cancelled = true;
        break;
      }
      ch.push(ids[size_t(i)]);
      ++generated_;
      if (i == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        ttft_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - r.arrival).count());
      }
    }
    if (cancelled) {
      ++cancelled_;  // the runtime would free the sequence's pages here
      ch.finish(FinishReason::kCancelled);
    } else {
      ch.finish(reason);
    }
    --running_;
  }

  void join() {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }

  mutable std::mutex mu_;
  std::vector<GenerationRequest> requests_;
  std::vector<std::thread> threads_;
  Histogram ttft_ = Histogram::latency();
  std::atomic<int64_t> running_{0}, cancelled_{0}, rejected_{0}, generated_{0};
  std::atomic<bool> draining_{false}, cancel_all_{false};
};

}  // namespace tunableop::serve::testing
