// The untuned-problems file ("OP,PARAMS" lines) that offline tuning (`tunableop tune`) consumes.
#include <fcntl.h>

#include <fmt/format.h>

#include <set>

#include "core/file_lock.h"
#include "core/results_stats.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

std::string trimmed(const std::string& s, size_t b, size_t e) {
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

// Calls fn(line_number, trimmed_line) for every non-blank line until fn returns false; a UTF-8
// byte order mark before the first line is skipped.
template <class Fn>
void for_each_line(const std::string& text, Fn&& fn) {
  size_t start = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  for (int number = 1; start < text.size(); ++number) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string::npos ? text.size() : nl;
    std::string line = trimmed(text, start, end);
    start = end + 1;
    if (!line.empty() && !fn(number, line)) return;
  }
}

// Parses every line; stops at the first malformed one when `strict`, skips it otherwise.
Status parse_untuned(const std::string& text, const std::string& path, bool strict, Pairs* out) {
  Status st;
  for_each_line(text, [&](int number, const std::string& line) {
    size_t comma = line.find(',');
    bool ok = comma != std::string::npos && line.find(',', comma + 1) == std::string::npos;
    std::string op = ok ? trimmed(line, 0, comma) : "";
    std::string params = ok ? trimmed(line, comma + 1, line.size()) : "";
    if (op.empty() || params.empty()) {
      if (strict) st = Status::parse_error(fmt::format("{}:{}: expected OP,PARAMS, found '{}'", path, number, line));
      return !strict;
    }
    out->emplace_back(std::move(op), std::move(params));
    return true;
  });
  return st;
}

}  // namespace

Status UntunedFile::record(const std::string& op, const std::string& params) {
  std::lock_guard<std::mutex> guard(mu_);
  auto key = std::make_pair(op, params);
  if (loaded_ && seen_.count(key)) return Status::ok();

  // Re-read under the lock every time a new key shows up: another process may have recorded it
  // since, and the file is small (one line per distinct problem).
  auto lock = FileLock::acquire(path_, O_RDWR | O_CREAT | O_APPEND, FileLock::Mode::kExclusive);
  if (!lock.is_ok()) return lock.status();
  auto size = regular_file_size(lock->fd(), path_);
  if (!size.is_ok()) return size.status();
  auto text = read_range(lock->fd(), path_, 0, *size);
  if (!text.is_ok()) return text.status();
  Pairs pairs;
  (void)parse_untuned(*text, path_, /*strict=*/false, &pairs);  // a bad line must not stop recording
  seen_.clear();
  for (auto& p : pairs) seen_[std::move(p)] = true;
  loaded_ = true;
  if (seen_.count(key)) return Status::ok();

  std::string line = (!text->empty() && text->back() != '\n') ? "\n" : "";
  line += sanitize_field(op) + "," + sanitize_field(params) + "\n";
  TUNABLEOP_RETURN_IF_ERROR(append_unsplit(lock->fd(), path_, text->size(), line));
  seen_[key] = true;
  return Status::ok();
}

StatusOr<Pairs> UntunedFile::read(const std::string& path) {
  auto text = read_file_shared(path);
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) return Status::not_found(fmt::format("{}: no such file", path));
  Pairs all;
  TUNABLEOP_RETURN_IF_ERROR(parse_untuned(**text, path, /*strict=*/true, &all));
  // Concatenated or hand-edited files may repeat a problem; tuning it twice would be wasted time.
  Pairs out;
  std::set<std::pair<std::string, std::string>> seen;
  for (auto& p : all) {
    if (seen.insert(p).second) out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_problem_list(const std::string& text, const std::string& path,
                                                                    std::vector<std::string>* malformed) {
  Pairs out;
  std::set<std::pair<std::string, std::string>> seen;
  for_each_line(text, [&](int number, const std::string& line) {
    if (line.rfind("Validator,", 0) == 0) return true;
    size_t c1 = line.find(',');
    size_t c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
    std::string op = c1 == std::string::npos ? "" : trimmed(line, 0, c1);
    std::string params =
        c1 == std::string::npos ? "" : trimmed(line, c1 + 1, c2 == std::string::npos ? line.size() : c2);
    if (op.empty() || params.empty()) {
      if (malformed) malformed->push_back(fmt::format("{}:{}: expected OP,PARAMS, found '{}'", path, number, line));
      return true;
    }
    if (seen.insert({op, params}).second) out.emplace_back(std::move(op), std::move(params));
    return true;
  });
  return out;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> UntunedFile::read_problems(
    const std::string& path, std::vector<std::string>* malformed) {
  auto text = read_file_shared(path);  // never blocks on a FIFO; regular files only
  if (!text.is_ok()) return text.status();
  if (!text->has_value()) return Status::not_found(fmt::format("{}: no such file", path));
  return parse_problem_list(**text, path, malformed);
}

}  // namespace tunableop
