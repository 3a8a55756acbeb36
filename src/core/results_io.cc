// Whole-file access to results files for tools: read with the statistics sidecar, merge several,
// rewrite one atomically while holding its lock (include/tunableop/results.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/file_lock.h"
#include "core/results_stats.h"
#include "tunableop/results.h"
#include "tunableop/safe_file.h"

namespace tunableop {
namespace {

using Key = std::pair<std::string, std::string>;

// Parses a results file's text and attaches the sidecar's statistics (the last line for each
// (op, params, solution): a re-tuned problem has several).
ResultsFileContents contents_of(const std::string& path, const std::string& text) {
  ResultsFileContents c;
  c.path = path;
  c.report = parse_results(text, path);
  c.stats_path = stats_path_for(path);
  auto stats_text = read_file_shared(c.stats_path);
  if (!stats_text.is_ok()) {
    c.stats_malformed.push_back(stats_text.status().message());
    return c;
  }
  c.has_stats = stats_text->has_value();
  if (!c.has_stats) return c;
  std::map<std::tuple<std::string, std::string, std::string>, ResultEntry> stats;
  for (auto& s : parse_stats(**stats_text, c.stats_path, &c.stats_malformed))
    stats[{s.op, s.params, s.solution}] = std::move(s);
  for (auto& e : c.report.entries) {
    auto it = stats.find({e.op, e.params, e.solution});
    if (it == stats.end()) continue;
    e.stats = it->second.stats;
    e.tuning_ms = it->second.tuning_ms;
    e.note = it->second.note;
    e.final_rounds = it->second.final_rounds;
    e.sm_mhz = it->second.sm_mhz;
    e.power_w = it->second.power_w;
  }
  return c;
}

StatusOr<ResultsFileContents> contents_from(const std::string& path, StatusOr<std::optional<std::string>> text) {
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) return Status::not_found(fmt::format("{}: no such file", path));
  return contents_of(path, **text);
}

bool same_file(const std::string& a, int fd) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::fstat(fd, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::vector<std::string> validator_conflicts(const std::vector<const ResultsFileContents*>& in) {
  std::set<std::string> keys;
  std::vector<std::map<std::string, std::string>> maps;
  for (const auto* i : in) {
    maps.emplace_back(i->report.validators.begin(), i->report.validators.end());
    for (const auto& [k, v] : i->report.validators) keys.insert(k);
  }
  std::vector<std::string> out;
  for (const auto& key : keys) {
    std::set<std::optional<std::string>> values;
    for (const auto& m : maps) {
      auto it = m.find(key);
      values.insert(it == m.end() ? std::nullopt : std::optional<std::string>(it->second));
    }
    if (values.size() == 1) continue;
    std::string detail;
    for (size_t i = 0; i < in.size(); ++i) {
      auto it = maps[i].find(key);
      detail += fmt::format("{}{}: {}", i ? ", " : "", in[i]->path,
                            it == maps[i].end() ? "<absent>" : "'" + it->second + "'");
    }
    out.push_back(fmt::format("{} ({})", key, detail));
  }
  return out;
}

}  // namespace

StatusOr<ResultsFileContents> read_results_file(const std::string& path) {
  return contents_from(path, read_file_shared(path));
}

MergedResults merge_results(const std::vector<ResultsFileContents>& inputs) {
  MergedResults m;
  std::vector<const ResultsFileContents*> voting;
  for (const auto& in : inputs)
    if (!in.report.validators.empty() || !in.report.entries.empty()) voting.push_back(&in);
  if (!voting.empty()) m.validators = voting.front()->report.validators;
  m.conflicts = validator_conflicts(voting);
  std::map<Key, size_t> index;
  for (const auto& in : inputs) {
    for (const auto& e : in.report.entries) {
      auto [it, fresh] = index.emplace(Key{e.op, e.params}, m.entries.size());
      if (fresh) {
        m.entries.push_back(e);
        continue;
      }
      ++m.duplicates;
      if (e.time_ms < m.entries[it->second].time_ms) {  // a tie keeps the earlier input's choice
        m.entries[it->second] = e;
        ++m.replaced;
      }
    }
  }
  return m;
}

struct ResultsFileRewrite::Held {
  std::optional<FileLock> lock;
};

ResultsFileRewrite::ResultsFileRewrite(std::string path, std::unique_ptr<Held> held)
    : path_(std::move(path)), held_(std::move(held)) {}
ResultsFileRewrite::ResultsFileRewrite(ResultsFileRewrite&&) noexcept = default;
ResultsFileRewrite& ResultsFileRewrite::operator=(ResultsFileRewrite&&) noexcept = default;
ResultsFileRewrite::~ResultsFileRewrite() = default;

StatusOr<ResultsFileRewrite> ResultsFileRewrite::begin(const std::string& path) {
  // The file and its sidecar are replaced by rename (AtomicFileWriter): only a regular file or a
  // new path can be; a symlink, FIFO, directory or device is refused before anything is read.
  for (const std::string& p : {path, stats_path_for(path)}) TUNABLEOP_RETURN_IF_ERROR(check_replaceable(p));
  auto held = std::make_unique<Held>();
  auto lock = FileLock::acquire(path, O_RDONLY, FileLock::Mode::kExclusive);
  if (lock.is_ok()) {
    held->lock = std::move(lock).value();
  } else if (lock.status().code() != StatusCode::kNotFound) {
    return lock.status();
  }
  return ResultsFileRewrite(path, std::move(held));
}

StatusOr<ResultsFileContents> ResultsFileRewrite::read(const std::string& path) const {
  if (held_->lock && same_file(path, held_->lock->fd())) {
    int fd = held_->lock->fd();
    auto size = regular_file_size(fd, path);
    if (!size.is_ok()) return size.status();
    TUNABLEOP_RETURN_IF_ERROR(check_readable_size(*size, path));
    auto text = read_range(fd, path, 0, *size);
    if (!text.is_ok()) return text.status();
    return contents_of(path, *text);
  }
  return read_results_file(path);
}

Status ResultsFileRewrite::replace(const Validators& validators, const std::vector<ResultEntry>& entries) {
  std::string text = format_validators(validators), stats_text;
  for (const auto& e : entries) {
    text += format_entry(e);
    stats_text += format_stats_line(e);  // "" for entries without statistics
  }
  // A failure (disk full) leaves the old file whole and removes the temporary.
  TUNABLEOP_RETURN_IF_ERROR(replace_regular_file(path_, text));
  // The sidecar describes the new file's entries: replace it too, or drop a stale one (only a
  // regular file: anything else was refused by begin()).
  const std::string stats = stats_path_for(path_);
  Status st;
  if (!stats_text.empty()) {
    st = replace_regular_file(stats, stats_text);
  } else if (check_replaceable(stats).is_ok() && ::unlink(stats.c_str()) != 0 && errno != ENOENT) {
    st = Status::io_error(errno_message(stats, "cannot remove the stale statistics file", errno));
  }
  if (!st.is_ok())
    return Status(st.code(), fmt::format("{} (the results are in {}; their statistics are not)", st.message(), path_));
  return Status::ok();
}

}  // namespace tunableop
