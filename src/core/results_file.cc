// The results file on disk: reading it, choosing where this environment writes, and appending
// one result at a time so several processes can tune into the same file at once.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/file_lock.h"
#include "core/results_stats.h"
#include "tunableop/results.h"
#include "tunableop/safe_file.h"

namespace tunableop {
namespace {

// More "-N" siblings than this would mean something is systematically wrong (a directory full of
// hand-edited files that collide); stop and say so rather than scan forever.
constexpr int kMaxSiblings = 16;

std::string show(const std::string* v) { return v ? "'" + *v + "'" : std::string("'<absent>'"); }

// Differences between a file's validators and this environment's. `whole_block` is false for
// validator lines found after the header (appended by someone else): only the keys present
// there are compared, since a header is never split.
std::vector<std::string> validator_mismatches(const Validators& file, const Validators& current, bool whole_block) {
  std::map<std::string, std::string> now;
  std::vector<std::string> order;
  for (const auto& [key, value] : current) {
    std::string k = sanitize_field(key);
    if (now.emplace(k, sanitize_field(value)).second) order.push_back(k);
  }
  std::map<std::string, std::string> in_file(file.begin(), file.end());
  std::vector<std::string> out;
  for (const auto& [key, value] : file) {
    auto it = now.find(key);
    if (it == now.end()) {
      out.push_back(fmt::format("{}: file {} vs now {}", key, show(&value), show(nullptr)));
    } else if (it->second != value) {
      out.push_back(fmt::format("{}: file {} vs now {}", key, show(&value), show(&it->second)));
    }
  }
  if (whole_block) {
    for (const auto& key : order) {
      if (!in_file.count(key)) out.push_back(fmt::format("{}: file {} vs now {}", key, show(nullptr), show(&now[key])));
    }
  }
  return out;
}

// A file this environment may read and append to: ours, and the same validators.
bool usable(const LoadReport& r, const Validators& current) {
  return r.ours && validator_mismatches(r.validators, current, true).empty();
}

void merge_into(std::vector<ResultEntry>& dst, std::vector<ResultEntry> src) {
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < dst.size(); ++i) index[{dst[i].op, dst[i].params}] = i;
  for (auto& e : src) {
    auto it = index.find({e.op, e.params});
    if (it != index.end()) {
      dst[it->second] = std::move(e);
    } else {
      index[{e.op, e.params}] = dst.size();
      dst.push_back(std::move(e));
    }
  }
}

// The sibling to try after `path` (the requested file, or sibling N).
int next_sibling_index(const std::string& requested, const std::string& path, const Validators& current) {
  if (path == requested) return 1;
  for (int i = 1; i <= kMaxSiblings; ++i) {
    if (env_sibling_path(requested, current, i) == path) return i + 1;
  }
  return kMaxSiblings + 1;
}

// Blank or only a UTF-8 byte order mark (what some editors save for an "empty" file): a new
// file, ours to write, not a foreign one.
bool is_blank_text(const std::string& text) {
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  return text.find_first_not_of(" \t\r\n", start) == std::string::npos;
}

Status stats_not_saved(const Status& why, const std::string& results_path) {
  return Status(why.code(), fmt::format("{} (the result itself was saved to {})", why.message(), results_path));
}

// (device, inode) of what `path` names now; (0, 0) when it does not exist.
std::pair<uint64_t, uint64_t> identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {uint64_t(st.st_dev), uint64_t(st.st_ino)};
}

}  // namespace

ResultsFile::ResultsFile(std::string path, Validators current)
    : requested_(std::move(path)), path_(requested_), current_(std::move(current)) {}

StatusOr<LoadReport> ResultsFile::open() {
  std::lock_guard<std::mutex> guard(mu_);
  path_ = requested_;
  read_offset_ = 0;
  dev_ = ino_ = 0;
  keys_.clear();

  auto text = read_file_shared(requested_);
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) {
    LoadReport missing;
    missing.path = requested_;
    missing.active_path = requested_;
    return missing;
  }
  LoadReport report = parse_results(**text, requested_);
  report.existed = true;
  report.active_path = requested_;
  // An empty (or blank) file is a new file (another process may just have created it): ours to
  // write; append() adds the validator header.
  if (is_blank_text(**text)) return report;
  if (report.ours) report.mismatches = validator_mismatches(report.validators, current_, true);
  if (report.ours && report.mismatches.empty()) {
    read_offset_ = (*text)->size();
    std::tie(dev_, ino_) = identity_of(path_);
    for (const auto& e : report.entries) keys_.insert({e.op, e.params});
    return report;
  }
  // Tunings of another environment would be wrong here; they stay on disk for that environment.
  // A foreign (PyTorch) file's entries are offered: the dispatcher knows which names it can run.
  if (report.ours) report.entries.clear();

  for (int index = 1; index <= kMaxSiblings; ++index) {
    std::string sibling = env_sibling_path(requested_, current_, index);
    auto sib_text = read_file_shared(sibling);
    if (!sib_text.is_ok()) return sib_text.status();
    if (!sib_text->has_value() || is_blank_text(**sib_text)) {
      path_ = sibling;
      report.active_path = sibling;
      return report;
    }
    LoadReport sib = parse_results(**sib_text, sibling);
    if (!usable(sib, current_)) continue;  // a hash collision or a hand-edited file: leave it alone
    path_ = sibling;
    report.active_path = sibling;
    read_offset_ = (*sib_text)->size();
    std::tie(dev_, ino_) = identity_of(path_);
    for (const auto& e : sib.entries) keys_.insert({e.op, e.params});
    report.malformed.insert(report.malformed.end(), sib.malformed.begin(), sib.malformed.end());
    merge_into(report.entries, std::move(sib.entries));  // this environment's own results win
    return report;
  }
  return Status::io_error(
      fmt::format("{}: validators differ and none of its {} \".env-\" siblings is usable", requested_, kMaxSiblings));
}

Status ResultsFile::append(const ResultEntry& e, bool replace, std::vector<ResultEntry>* picked_up,
                           bool* line_written) {
  std::lock_guard<std::mutex> guard(mu_);
  if (line_written) *line_written = false;
  for (int hop = 0; hop <= kMaxSiblings; ++hop) {
    auto lock = FileLock::acquire(path_, O_RDWR | O_CREAT | O_APPEND, FileLock::Mode::kExclusive);
    if (!lock.is_ok()) return lock.status();
    auto size = regular_file_size(lock->fd(), path_);
    if (!size.is_ok()) return size.status();
    struct stat held {};
    if (::fstat(lock->fd(), &held) == 0) {
      if (dev_ && (uint64_t(held.st_dev) != dev_ || uint64_t(held.st_ino) != ino_)) {
        read_offset_ = 0;  // replaced (e.g. by `tunableop merge`): what we knew no longer holds
        keys_.clear();
      }
      dev_ = uint64_t(held.st_dev), ino_ = uint64_t(held.st_ino);
    }
    if (*size < read_offset_) {
      // Truncated or rewritten by someone else: what we knew about it no longer holds.
      read_offset_ = 0;
      keys_.clear();
    }
    bool header_needed = *size == 0;
    if (*size > read_offset_) {
      TUNABLEOP_RETURN_IF_ERROR(check_readable_size(*size - read_offset_, path_));
      auto text = read_range(lock->fd(), path_, read_offset_, *size - read_offset_);
      if (!text.is_ok()) return text.status();
      LoadReport r = parse_results(*text, path_);
      // A file that did not exist at open() may since have been created by a process of another
      // environment; its header is then not ours to append under. A blank one is still new.
      const bool blank = read_offset_ == 0 && is_blank_text(*text);
      header_needed = blank;
      bool fits = read_offset_ == 0 ? (blank || usable(r, current_))
                                    : validator_mismatches(r.validators, current_, false).empty();
      if (!fits) {
        int index = next_sibling_index(requested_, path_, current_);
        if (index > kMaxSiblings) {
          return Status::io_error(
              fmt::format("{}: written by another environment meanwhile and no \".env-\" sibling is usable", path_));
        }
        path_ = env_sibling_path(requested_, current_, index);
        read_offset_ = 0;
        keys_.clear();
        continue;
      }
      for (auto& pe : r.entries) {
        keys_.insert({pe.op, pe.params});
        if (picked_up) picked_up->push_back(std::move(pe));
      }
      read_offset_ = *size;
    }

    if (!replace && keys_.count({e.op, e.params})) return Status::ok();  // another process got there first

    std::string data;
    if (*size > 0) {
      // A line cut short by a foreign writer must not swallow ours.
      auto last = read_range(lock->fd(), path_, *size - 1, 1);
      if (!last.is_ok()) return last.status();
      if (last->empty() || last->front() != '\n') data.push_back('\n');
    }
    if (header_needed) data += format_validators(current_);
    data += format_entry(e);
    TUNABLEOP_RETURN_IF_ERROR(append_unsplit(lock->fd(), path_, *size, data));
    // Padding may have been added: the file's size, not our byte count, is the new offset.
    auto new_size = regular_file_size(lock->fd(), path_);
    if (!new_size.is_ok()) return new_size.status();
    read_offset_ = *new_size;
    keys_.insert({e.op, e.params});
    if (line_written) *line_written = true;

    if (e.stats || !e.note.empty()) {  // statistics, or a note alone (in_context.h)
      // Under the results file's lock, so stats lines of concurrent writers never interleave.
      std::string stats_path = stats_path_for(path_);
      auto fd = open_regular(stats_path, O_WRONLY | O_CREAT | O_APPEND);
      if (!fd.is_ok()) return stats_not_saved(fd.status(), path_);
      auto stats_size = regular_file_size(*fd, stats_path);
      Status st =
          stats_size.is_ok() ? append_unsplit(*fd, stats_path, *stats_size, format_stats_line(e)) : stats_size.status();
      ::close(*fd);
      return st.is_ok() ? st : stats_not_saved(st, path_);
    }
    return Status::ok();
  }
  return Status::io_error(fmt::format("{}: could not find a results file this environment may write", requested_));
}

StatusOr<ResultsFile::Change> ResultsFile::refresh(std::vector<ResultEntry>* picked_up) {
  std::lock_guard<std::mutex> guard(mu_);
  struct stat named {};
  if (::stat(path_.c_str(), &named) != 0) return read_offset_ > 0 ? Change::kReplaced : Change::kNone;
  const bool same = !dev_ || (uint64_t(named.st_dev) == dev_ && uint64_t(named.st_ino) == ino_);
  if (!same || size_t(named.st_size) < read_offset_) return Change::kReplaced;
  if (size_t(named.st_size) == read_offset_) return Change::kNone;
  auto lock = FileLock::acquire(path_, O_RDONLY, FileLock::Mode::kShared);
  if (!lock.is_ok()) return lock.status();
  auto size = regular_file_size(lock->fd(), path_);
  if (!size.is_ok()) return size.status();
  if (*size < read_offset_) return Change::kReplaced;
  auto text = read_range(lock->fd(), path_, read_offset_, *size - read_offset_);
  if (!text.is_ok()) return text.status();
  LoadReport r = parse_results(*text, path_);
  bool fits = read_offset_ == 0 ? (is_blank_text(*text) || usable(r, current_))
                                : validator_mismatches(r.validators, current_, false).empty();
  if (!fits) return Change::kReplaced;
  read_offset_ = *size;
  std::tie(dev_, ino_) = identity_of(path_);
  for (auto& e : r.entries) {
    keys_.insert({e.op, e.params});
    if (picked_up) picked_up->push_back(std::move(e));
  }
  return Change::kAppended;
}

}  // namespace tunableop
