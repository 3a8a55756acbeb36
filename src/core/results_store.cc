#include <mutex>
#include <shared_mutex>

#include "tunableop/results.h"

namespace tunableop {

std::optional<ResultEntry> ResultsStore::lookup(const std::string& op, const std::string& params) const {
  std::shared_lock lock(mu_);
  auto it = index_.find({op, params});
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second];
}

void ResultsStore::insert(ResultEntry e) {
  std::unique_lock lock(mu_);
  auto key = std::make_pair(e.op, e.params);
  auto it = index_.find(key);
  if (it != index_.end()) {
    // Replace in place: entries() keeps the order in which problems were first seen.
    entries_[it->second] = std::move(e);
  } else {
    index_.emplace(std::move(key), entries_.size());
    entries_.push_back(std::move(e));
  }
  version_.fetch_add(1, std::memory_order_acq_rel);
}

bool ResultsStore::contains(const std::string& op, const std::string& params) const {
  std::shared_lock lock(mu_);
  return index_.count({op, params}) > 0;
}

std::vector<ResultEntry> ResultsStore::entries() const {
  std::shared_lock lock(mu_);
  return entries_;
}

size_t ResultsStore::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

void ResultsStore::clear() {
  std::unique_lock lock(mu_);
  index_.clear();
  entries_.clear();
  version_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace tunableop
