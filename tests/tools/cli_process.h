// Runs the built `tunableop` binary as a subprocess for the hardening tests: arguments, environment (every TUNABLEOP_*
// and PYTORCH_TUNABLEOP_* variable of the test process is dropped first), working directory,
// an optional file size limit (a full disk, see support/file_faults.h) and a timeout, so that a
// command that hangs on a FIFO fails the test instead of hanging it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tunableop::testing {

struct CliRun {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string out, err;
  long max_rss_kib = 0;
  std::string all() const { return out + err; }
};

struct CliOptions {
  std::vector<std::string> env{};  // "NAME=value"
  std::string cwd{};               // default: the test process's
  uint64_t file_size_limit = 0;    // 0: none
  int timeout_s = 120;
};

CliRun run_cli(const std::vector<std::string>& args, const CliOptions& options = {});

// "exit 2, signal 0, stdout: ..., stderr: ..." for assertion messages.
std::string describe(const CliRun& r);

}  // namespace tunableop::testing
