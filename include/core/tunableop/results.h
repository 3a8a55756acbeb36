// Tuning results: the in-memory store and the PyTorch-compatible results file.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "tunableop/status.h"

namespace tunableop {

struct Measurement {
  double min_ms = 0, median_ms = 0, mean_ms = 0, std_ms = 0;
  int runs = 0;
};

struct ResultEntry {
  std::string op;        // GemmTunableOp_float_TN
  std::string params;    // tn_1024_512_2048
  std::string solution;  // Default, Gemm_Openblas_t2, ...
  double time_ms = 0;    // median of the final measurement (4th column of the file)
  std::optional<Measurement> stats;
  double tuning_ms = 0;  // wall time spent tuning this problem
  // Default's median in the same final measurement as time_ms (in memory only, 0 when unknown):
  // what the in-context check records when it drops this choice for Default.
  double default_ms = 0;
  // Why this entry is what it is, when that needs saying (the in-context check's drop); kept
  // in the `.stats` sidecar's tenth field.
  std::string note;
  // How the final rounds were timed: "sustained" (the device held under load until its clock
  // settled, docs/design.md "Sustained timing") or "burst"; "" when not tuned here. With the
  // median over those rounds of the device's SM clock (MHz) and board power (W), 0 when unknown
  // (no NVML). Kept in the `.stats` sidecar's fields 11-13.
  std::string final_rounds;
  double sm_mhz = 0;
  double power_w = 0;
};

using Validators = std::vector<std::pair<std::string, std::string>>;  // ordered KEY, VALUE

// Thread-safe map (op, params) -> entry.
class ResultsStore {
 public:
  std::optional<ResultEntry> lookup(const std::string& op, const std::string& params) const;
  void insert(ResultEntry e);  // replaces an existing entry for the same key
  bool contains(const std::string& op, const std::string& params) const;
  std::vector<ResultEntry> entries() const;  // in insertion order
  size_t size() const;
  void clear();
  // Moves the version without changing an entry: every plan decides again at its next run
  // (the in-context check learns a workload's problems that way).
  void touch() { version_.fetch_add(1, std::memory_order_acq_rel); }
  // Counts every change (insert, clear): part of Context::generation(). One atomic load.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> version_{0};
  mutable std::shared_mutex mu_;
  std::map<std::pair<std::string, std::string>, size_t> index_;
  std::vector<ResultEntry> entries_;
};

// What reading a results file found.
struct LoadReport {
  std::string path;
  // The file this process reads and writes from now on: == path, or the "<stem>.env-<hash>"
  // sibling when path's validators differ from the current ones or path is a foreign file.
  std::string active_path;
  bool existed = false;
  bool ours = false;                            // written by tunableop (has a TUNABLEOP_VERSION validator)
  Validators validators;                        // as found in the file
  std::vector<std::string> foreign_validators;  // keys we do not produce (PyTorch's, ...)
  std::vector<std::string> mismatches;          // "KEY: file 'a' vs now 'b'" (ours only)
  std::vector<std::string> malformed;           // "path:LINE: reason"
  std::vector<ResultEntry> entries;
};

// Parses one file's text (no I/O): validators, entries, malformed lines with line numbers.
LoadReport parse_results(const std::string& text, const std::string& path_for_messages);

// Formats "Validator,K,V" lines and entry lines exactly as PyTorch does.
std::string format_validators(const Validators& v);
std::string format_entry(const ResultEntry& e);

// Expands the "%d" naming rule: "%d" -> ordinal; no "%d" -> ordinal before the extension.
std::string results_path_for(const std::string& pattern, const std::string& ordinal);

// One results file on disk bound to the current environment's validators.
// - open(): reads the file. If its validators differ from `current`, the file is left untouched
//   and a sibling "<stem>.env-<hash>.csv" becomes the file this process reads and writes; both
//   names are reported.
// - append(): under an exclusive lock (flock), picks up lines other processes appended since,
//   writes the validator header if the file is new or empty, and appends the entry unless
//   another process already stored that key. The line is written with one write(2), so a killed
//   process loses nothing already appended.
// Extra per-entry statistics go to a sidecar "<file>.stats" (PyTorch's parser wants 4 columns).
class ResultsFile {
 public:
  ResultsFile(std::string path, Validators current);
  StatusOr<LoadReport> open();
  // `replace`: append even when the key is already in the file (a re-tuned stale entry; the
  // later line wins on load). Fails when the line or its statistics could not be written;
  // `line_written` (when given) tells the two apart: true when only the .stats sidecar failed.
  // A failed line never leaves a partial line behind (disk full: it is cut off again).
  Status append(const ResultEntry& e, bool replace = false, std::vector<ResultEntry>* picked_up = nullptr,
                bool* line_written = nullptr);
  // What other processes did to the file since open() or the last append()/refresh(): kAppended
  // (their new entries go to `picked_up`), or kReplaced when the path names another file now,
  // the file shrank or was removed, or lines of another environment were appended (the caller
  // reopens it). One stat(2) when nothing changed.
  enum class Change { kNone, kAppended, kReplaced };
  StatusOr<Change> refresh(std::vector<ResultEntry>* picked_up);
  const std::string& path() const { return path_; }                 // the file in use
  const std::string& requested_path() const { return requested_; }  // the one asked for
  const Validators& validators() const { return current_; }

 private:
  std::string requested_;
  std::string path_;
  Validators current_;
  size_t read_offset_ = 0;                              // bytes of path_ already parsed
  uint64_t dev_ = 0, ino_ = 0;                          // identity of path_ when last read (0: unknown)
  std::set<std::pair<std::string, std::string>> keys_;  // (op, params) already in path_
  std::mutex mu_;
};

// --- Whole-file access for tools (`tunableop show`, `tunableop merge`): a results file with its
// statistics sidecar "<file>.stats" (PyTorch's parser wants exactly four columns, so min /
// median / mean / std, runs and tuning time live there).

// A results file as read: its report (validators, entries, malformed lines); entries carry the
// sidecar's statistics (stats, tuning_ms) where the sidecar has a line for their solution.
struct ResultsFileContents {
  std::string path;
  LoadReport report;
  std::string stats_path;  // "<path>.stats"
  bool has_stats = false;  // the sidecar exists
  std::vector<std::string> stats_malformed;
};

// Reads `path` and its sidecar under shared locks (a tuner appending meanwhile is waited for).
// NotFound when `path` does not exist; IoError when it cannot be read.
StatusOr<ResultsFileContents> read_results_file(const std::string& path);

// Several results files merged into one: on a problem present in several, the faster time wins
// (a tie keeps the earlier input's). Inputs with neither validators nor entries do not vote on
// the validators; the first voting input's are kept, and `conflicts` lists every key on which
// the voting inputs differ ("KEY (a.csv: 'x', b.csv: <absent>)").
struct MergedResults {
  Validators validators;
  std::vector<std::string> conflicts;
  std::vector<ResultEntry> entries;
  size_t duplicates = 0;  // entries found in more than one input
  size_t replaced = 0;    // ... of which a later input's was faster
};
MergedResults merge_results(const std::vector<ResultsFileContents>& inputs);

// Exclusive hold of a results file that is about to be rewritten (merge into it): from acquire()
// until replace(), a tuner appending to the file waits, then notices the replaced file and
// reopens it. Reading the held file goes through the lock (a second lock from this process
// would wait for itself).
class ResultsFileRewrite {
 public:
  // Locks `path` when it exists (a missing file needs no lock: it is created by replace()).
  static StatusOr<ResultsFileRewrite> begin(const std::string& path);
  ResultsFileRewrite(ResultsFileRewrite&&) noexcept;
  ResultsFileRewrite& operator=(ResultsFileRewrite&&) noexcept;
  ~ResultsFileRewrite();
  // read_results_file(), through the held lock when `path` is the held file.
  StatusOr<ResultsFileContents> read(const std::string& path) const;
  // Writes validators and entries to a temporary file beside the held one and renames it over
  // it (readers see the old file or the new, never half of one); the sidecar is replaced the
  // same way with the entries' statistics, or removed when none has any.
  Status replace(const Validators& validators, const std::vector<ResultEntry>& entries);
  const std::string& path() const { return path_; }

 private:
  struct Held;
  ResultsFileRewrite(std::string path, std::unique_ptr<Held> held);
  std::string path_;
  std::unique_ptr<Held> held_;
};

// A file of untuned problems ("op,params" lines), deduplicated, appended under a lock.
class UntunedFile {
 public:
  explicit UntunedFile(std::string path) : path_(std::move(path)) {}
  Status record(const std::string& op, const std::string& params);
  const std::string& path() const { return path_; }
  static StatusOr<std::vector<std::pair<std::string, std::string>>> read(const std::string& path);
  // The problems for offline tuning (`tunableop tune`): like read(), but lenient. Results-file
  // lines work too (their first two fields; Validator lines are skipped), a UTF-8 byte order
  // mark and blank lines are ignored, repeats kept once, and each malformed line is described in
  // `malformed` ("path:LINE: expected OP,PARAMS, found '...'") and skipped.
  static StatusOr<std::vector<std::pair<std::string, std::string>>> read_problems(const std::string& path,
                                                                                  std::vector<std::string>* malformed);

 private:
  std::string path_;
  std::mutex mu_;
  bool loaded_ = false;
  std::map<std::pair<std::string, std::string>, bool> seen_;
};

}  // namespace tunableop
