// Several processes tuning into one results file: concurrent appends and kill -9.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/results_stats.h"
#include "core/results_test_util.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

using testing::read_text;
using testing::TempDir;

const Validators kEnv = {
    {"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "Test CPU avx2 2 cores"}, {"OPENBLAS_VERSION", "0.3.21"}};

ResultEntry entry(const std::string& params, const std::string& solution, double time_ms) {
  ResultEntry e;
  e.op = "GemmTunableOp_float_NN";
  e.params = params;
  e.solution = solution;
  e.time_ms = time_ms;
  return e;
}

// Forks `n` children that each wait on a shared barrier, then run body(i) and exit with its
// return value; returns the exit codes. The barrier makes them really start at once.
std::vector<int> run_children(int n, const std::function<int(int)>& body) {
  int barrier[2];
  EXPECT_EQ(::pipe(barrier), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(barrier[1]);
      char c;
      while (::read(barrier[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::_exit(body(i));  // _exit: no gtest teardown, no atexit handlers in the child
    }
    pids.push_back(pid);
  }
  ::close(barrier[0]);
  ::close(barrier[1]);  // EOF releases every child at once
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// How many non-blank lines of `text` start with `op,params,`.
std::map<std::string, int> line_counts_by_params(const std::string& text) {
  std::map<std::string, int> counts;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    if (line.rfind("GemmTunableOp_float_NN,", 0) != 0) continue;
    size_t a = line.find(','), b = line.find(',', a + 1);
    counts[line.substr(a + 1, b - a - 1)]++;
  }
  return counts;
}

int count_occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

TEST(ResultsConcurrency, SixteenProcessesAppendIntoOneNewFile) {
  TempDir dir;
  const std::string path = dir.file("tunableop_results0.csv");
  constexpr int kProcs = 16, kOwn = 25, kShared = 10;

  auto codes = run_children(kProcs, [&](int child) {
    ResultsFile f(path, kEnv);
    if (!f.open().is_ok()) return 10;
    for (int j = 0; j < kOwn; ++j) {
      ResultEntry e = entry("own_" + std::to_string(child) + "_" + std::to_string(j),
                            "Gemm_Child" + std::to_string(child), 0.5 + j);
      e.stats = Measurement{0.4, 0.5, 0.5, 0.01, 10};
      if (!f.append(e).is_ok()) return 11;
      // Every child also tunes the same few problems: only the first to store one may write it.
      ResultEntry s = entry("shared_" + std::to_string(j % kShared), "Gemm_Child" + std::to_string(child), 1.0);
      s.stats = Measurement{0.9, 1.0, 1.0, 0.01, 10};
      if (!f.append(s).is_ok()) return 12;
    }
    return 0;
  });
  for (int i = 0; i < kProcs; ++i) EXPECT_EQ(codes[i], 0) << "child " << i;

  const std::string text = read_text(path);
  LoadReport r = parse_results(text, path);
  EXPECT_TRUE(r.malformed.empty()) << r.malformed.front();
  EXPECT_TRUE(r.ours);
  EXPECT_EQ(r.validators, kEnv);
  EXPECT_EQ(count_occurrences(text, "Validator,"), static_cast<int>(kEnv.size()));  // one header block
  EXPECT_EQ(text.rfind(format_validators(kEnv), 0), 0u);                            // at the very top
  EXPECT_EQ(r.entries.size(), static_cast<size_t>(kProcs * kOwn + kShared));
  auto counts = line_counts_by_params(text);
  EXPECT_EQ(counts.size(), static_cast<size_t>(kProcs * kOwn + kShared));
  for (const auto& [params, n] : counts) EXPECT_EQ(n, 1) << params;

  // The stats sidecar, written under the same lock, has one intact line per stored entry.
  std::vector<std::string> bad;
  auto stats = parse_stats(read_text(stats_path_for(path)), stats_path_for(path), &bad);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(stats.size(), static_cast<size_t>(kProcs * kOwn + kShared));
}

TEST(ResultsConcurrency, KillNineLosesNothingAlreadyAppended) {
  TempDir dir;
  const std::string path = dir.file("tunableop_results0.csv");
  std::set<std::string> reported;
  constexpr int kRounds = 6;

  for (int round = 0; round < kRounds; ++round) {
    int report[2];
    ASSERT_EQ(::pipe(report), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(report[0]);
      ResultsFile f(path, kEnv);
      if (!f.open().is_ok()) ::_exit(10);
      for (int j = 0; j < 1000000; ++j) {
        ResultEntry e = entry(fmt::format("r{}_{}", round, j), "Gemm_Solution_With_A_Long_Name", 0.125);
        e.stats = Measurement{0.1, 0.125, 0.13, 0.01, 50};
        if (!f.append(e).is_ok()) ::_exit(11);
        // Only now is the append "returned": tell the parent.
        if (::write(report[1], &j, sizeof j) != static_cast<ssize_t>(sizeof j)) ::_exit(12);
      }
      ::_exit(0);
    }
    ::close(report[1]);
    // Let the child get a varying distance into its loop, then kill it mid-append.
    const int kill_after = 40 + 37 * round;
    int received = 0, j = 0;
    while (received < kill_after && ::read(report[0], &j, sizeof j) == static_cast<ssize_t>(sizeof j)) {
      reported.insert(fmt::format("r{}_{}", round, j));
      ++received;
    }
    ASSERT_EQ(received, kill_after) << "child died early";
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    // Anything the child reported before dying had returned from append() too.
    while (::read(report[0], &j, sizeof j) == static_cast<ssize_t>(sizeof j)) {
      reported.insert(fmt::format("r{}_{}", round, j));
    }
    ::close(report[0]);
  }

  const std::string text = read_text(path);
  LoadReport r = parse_results(text, path);
  EXPECT_TRUE(r.malformed.empty()) << r.malformed.front();
  EXPECT_EQ(count_occurrences(text, "Validator,TUNABLEOP_VERSION,"), 1);
  std::set<std::string> stored;
  for (const auto& e : r.entries) stored.insert(e.params);
  for (const auto& key : reported) EXPECT_TRUE(stored.count(key)) << key << " was appended but is missing";
  EXPECT_GE(stored.size(), reported.size());
  std::vector<std::string> bad;
  (void)parse_stats(read_text(stats_path_for(path)), stats_path_for(path), &bad);
  EXPECT_TRUE(bad.empty()) << bad.front();
}

}  // namespace
}  // namespace tunableop
