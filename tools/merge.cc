// `tunableop merge A B [more...] -o C`: one results file from several (e.g. one per machine of a
// fleet with identical hardware, or per shard of an offline tuning run).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cli_support.h"
#include "commands.h"
#include "core/file_lock.h"
#include "core/results_stats.h"
#include "core/safe_file.h"
#include "tunableop/results.h"

namespace tunableop::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
};

struct Input {
  std::string path;
  LoadReport report;
  std::map<std::tuple<std::string, std::string, std::string>, ResultEntry> stats;  // (op, params, solution)
};

using Key = std::pair<std::string, std::string>;

bool same_file(const std::string& a, int fd) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::fstat(fd, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Reads a file, through `held` when it is the output we already hold locked (a second flock on
// it from this process would wait for ourselves).
StatusOr<std::optional<std::string>> read_input(const std::string& path, const FileLock* held) {
  if (held && same_file(path, held->fd())) {
    auto size = regular_file_size(held->fd(), path);
    if (!size.is_ok()) return size.status();
    auto text = read_range(held->fd(), path, 0, *size);
    if (!text.is_ok()) return text.status();
    return std::optional<std::string>(std::move(text).value());
  }
  return read_file_shared(path);
}

// "KEY (a.csv: 'x', b.csv: <absent>)" for every key on which the inputs do not all agree.
std::vector<std::string> validator_conflicts(const std::vector<Input>& in) {
  std::set<std::string> keys;
  std::vector<std::map<std::string, std::string>> maps;
  for (const auto& i : in) {
    maps.emplace_back(i.report.validators.begin(), i.report.validators.end());
    for (const auto& [k, v] : i.report.validators) keys.insert(k);
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
      detail +=
          fmt::format("{}{}: {}", i ? ", " : "", in[i].path, it == maps[i].end() ? "<absent>" : "'" + it->second + "'");
    }
    out.push_back(fmt::format("{} ({})", key, detail));
  }
  return out;
}

int merge(const MergeArgs& a) {
  if (a.inputs.size() < 2) {
    fmt::print(stderr, "tunableop merge: give at least two results files to merge (got {})\n", a.inputs.size());
    return 2;
  }
  // The output and its sidecar are replaced by rename (safe_file.h): only a regular file or a new
  // path can be; a symlink, FIFO, directory or device is refused before anything is read.
  const std::string stats_out = stats_path_for(a.output);
  for (const std::string& path : {a.output, stats_out}) {
    if (Status st = check_replaceable(path); !st.is_ok()) {
      fmt::print(stderr, "tunableop merge: -o {}: {}\n", printable(a.output), printable(st.message()));
      return 2;
    }
  }
  // Hold the output's lock throughout when it exists, so a process tuning into it waits, then
  // notices the replaced file and re-opens it (ResultsFile checks the inode after locking).
  std::optional<FileLock> held;
  if (auto lock = FileLock::acquire(a.output, O_RDONLY, FileLock::Mode::kExclusive); lock.is_ok()) {
    held = std::move(lock).value();
  } else if (lock.status().code() != StatusCode::kNotFound) {
    fmt::print(stderr, "tunableop merge: {}\n", printable(lock.status().message()));
    return 2;
  }

  std::vector<Input> inputs;
  for (const auto& path : a.inputs) {
    auto text = read_input(path, held ? &*held : nullptr);
    if (!text.is_ok()) {
      fmt::print(stderr, "tunableop merge: {}\n", printable(text.status().message()));
      return 2;
    }
    if (!text->has_value()) {
      fmt::print(stderr, "tunableop merge: {}: no such file\n", printable(path));
      return 2;
    }
    Input in{path, parse_results(**text, path), {}};
    for (const auto& m : in.report.malformed) fmt::print(stderr, "warning: skipping malformed line {}\n", printable(m));
    std::string stats_path = stats_path_for(path);
    if (auto stats_text = read_input(stats_path, nullptr); !stats_text.is_ok()) {
      fmt::print(stderr, "warning: {}; statistics of {} are not merged\n", printable(stats_text.status().message()),
                 printable(path));
    } else if (stats_text->has_value()) {
      for (auto& s : parse_stats(**stats_text, stats_path)) in.stats[{s.op, s.params, s.solution}] = std::move(s);
    }
    inputs.push_back(std::move(in));
  }

  // Files with neither validators nor entries contribute nothing and do not vote.
  std::vector<Input> voting;
  for (const auto& in : inputs)
    if (!in.report.validators.empty() || !in.report.entries.empty()) voting.push_back(in);
  const Validators validators = voting.empty() ? Validators{} : voting.front().report.validators;
  if (auto conflicts = validator_conflicts(voting); !conflicts.empty()) {
    if (!a.force) {
      fmt::print(stderr, "tunableop merge: the inputs were tuned in different environments; validators differ:\n");
      for (const auto& c : conflicts) fmt::print(stderr, "  {}\n", printable(c));
      fmt::print(stderr,
                 "a solution fastest in one environment may be slow or invalid in another; "
                 "use --force to merge anyway (the output keeps the validators of {})\n",
                 voting.front().path);
      return 1;
    }
    fmt::print(stderr, "warning: --force: merging despite {} differing validators; keeping those of {}\n",
               conflicts.size(), voting.front().path);
  }

  std::vector<ResultEntry> merged;
  std::vector<size_t> source;  // index of the input each merged entry came from
  std::map<Key, size_t> index;
  size_t duplicates = 0, replaced = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& r = inputs[i].report;
    fmt::print("{}: {} {} ({}){}\n", printable(inputs[i].path), r.entries.size(),
               r.entries.size() == 1 ? "entry" : "entries", r.ours ? "tunableop" : "foreign",
               r.malformed.empty() ? "" : fmt::format(", {} malformed lines skipped", r.malformed.size()));
    for (const auto& e : r.entries) {
      auto [it, fresh] = index.emplace(Key{e.op, e.params}, merged.size());
      if (fresh) {
        merged.push_back(e);
        source.push_back(i);
        continue;
      }
      ++duplicates;
      if (e.time_ms < merged[it->second].time_ms) {  // a tie keeps the earlier input's choice
        merged[it->second] = e;
        source[it->second] = i;
        ++replaced;
      }
    }
  }

  std::string text = format_validators(validators);
  std::string stats_text;
  for (size_t j = 0; j < merged.size(); ++j) {
    const ResultEntry& e = merged[j];
    text += format_entry(e);
    const auto& stats = inputs[source[j]].stats;
    if (auto it = stats.find({e.op, e.params, e.solution}); it != stats.end())
      stats_text += format_stats_line(it->second);
  }
  // A failed write (disk full) leaves the old output whole: the inputs and it are all still there.
  if (Status st = replace_regular_file(a.output, text); !st.is_ok()) {
    fmt::print(stderr, "tunableop merge: {}; nothing was merged\n", printable(st.message()));
    return 1;
  }
  // The sidecar describes the output's entries: replace it too, or drop a stale one (only a
  // regular file: check_replaceable refused anything else above).
  if (!stats_text.empty()) {
    if (Status st = replace_regular_file(stats_out, stats_text); !st.is_ok()) {
      fmt::print(stderr, "tunableop merge: {} (the merged results are in {}; their statistics are not)\n",
                 printable(st.message()), printable(a.output));
      return 1;
    }
  } else if (check_replaceable(stats_out).is_ok() && ::unlink(stats_out.c_str()) != 0 && errno != ENOENT) {
    fmt::print(stderr, "warning: {}\n",
               printable(errno_message(stats_out, "cannot remove the stale statistics file", errno)));
  }
  fmt::print(
      "wrote {}: {} {} from {} files ({} duplicate {} resolved by keeping the faster time, {} of them from a "
      "later file)\n",
      printable(a.output), merged.size(), merged.size() == 1 ? "entry" : "entries", inputs.size(), duplicates,
      duplicates == 1 ? "entry" : "entries", replaced);
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* c = app.add_subcommand("merge", "Merge results files; on a problem present in several, keep the faster");
  c->add_option("FILES", a->inputs, "results files to merge (two or more)")->required();
  c->add_option("-o,--output", a->output,
                "merged results file to write (replaced atomically; may be an input; a symlink, FIFO or device "
                "is refused)")
      ->required();
  c->add_flag("--force", a->force, "merge even when the files' validators differ");
  c->callback([a]() {
    if (int rc = merge(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tunableop::cli
