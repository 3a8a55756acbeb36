#include "serve/request.h"

#include <algorithm>
#include <utility>

namespace tunableop::serve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "none";
}

void Channel::push(int32_t token) {
  append(token);
  wake();
}

void Channel::append(int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) pending_.push_back(token);
}

void Channel::wake() { cv_.notify_all(); }

void Channel::finish(FinishReason reason, Status error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    reason_ = reason;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

Channel::Update Channel::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [this] { return finished_ || !pending_.empty(); });
  Update u;
  u.tokens.swap(pending_);
  // The end is reported once every token before it has been taken.
  u.finished = finished_;
  u.reason = reason_;
  u.error = error_;
  return u;
}

void Channel::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

bool Channel::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

Histogram Histogram::with_bounds(std::vector<double> upper) {
  Histogram h;
  h.bounds = std::move(upper);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

Histogram Histogram::latency() {
  return with_bounds({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1,  0.15, 0.2,
                      0.3,   0.5,    0.75,  1.0,  1.5,   2.0,  2.5,   5.0,  7.5,  10.0, 20.0,  30.0, 60.0});
}

Histogram Histogram::step() {
  return with_bounds({0.0001, 0.00025, 0.0005, 0.001,  0.002, 0.003,  0.004, 0.006, 0.008,
                      0.01,   0.0125,  0.015,  0.0175, 0.02,  0.0225, 0.025, 0.03,  0.035,
                      0.04,   0.05,    0.075,  0.1,    0.25,  0.5,    1.0,   2.5,   10.0});
}

void Histogram::observe(double seconds) {
  const size_t i = size_t(std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin());
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  ++counts[i];
  sum += seconds;
  ++count;
}

}  // namespace tunableop::serve
