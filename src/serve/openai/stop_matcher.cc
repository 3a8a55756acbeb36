#include "serve/openai/stop_matcher.h"

#include <algorithm>

namespace tunableop::serve::openai {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {}

StopMatcher::Result StopMatcher::put(std::string_view piece) {
  Result r;
  if (stopped_) return r;
  held_.append(piece);
  // Everything released so far could not begin a stop string, so a match starts in held_. The
  // earliest match wins (a shorter stop string inside a longer one that starts later loses).
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos && (at < best || (at == best && s.size() > which->size()))) {
      best = at;
      which = &s;
    }
  }
  if (which) {
    stopped_ = true;
    matched_ = *which;
    r.text = held_.substr(0, include_stop_ ? best + which->size() : best);
    r.stopped = true;
    held_.clear();
    return r;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace tunableop::serve::openai
