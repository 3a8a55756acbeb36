#include "serve_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>

namespace tunableop::testing {

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (!stderr_path_.empty()) ::unlink(stderr_path_.c_str());
}

std::string ServeProcess::stderr_text() const {
  std::ifstream in(stderr_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ServeProcess::start(const std::vector<std::string>& args, std::chrono::seconds timeout) {
  static std::atomic<int> counter{0};
  stderr_path_ = "/tmp/tunableop_serve_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".err";
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    error_ = "pipe failed";
    return false;
  }
  std::vector<std::string> all = launcher_;
  all.push_back(TUNABLEOP_CLI_PATH);
  all.push_back("serve");
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--port");
  all.push_back("0");
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], 1);
    const int err = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err >= 0) ::dup2(err, 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    // Small and quiet: one thread per GEMM, quick tuning if any.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::unsetenv("TUNABLEOP_ENABLED");
    ::unsetenv("TUNABLEOP_TUNING");
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  // The ready line: everything up to the first newline on stdout.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char c = 0;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      error_ = "no ready line within the timeout";
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) continue;
    const ssize_t n = ::read(out[0], &c, 1);
    if (n <= 0) {
      error_ = "stdout closed before the ready line (the server exited)";
      break;
    }
    if (c == '\n') break;
    line += c;
  }
  ::close(out[0]);
  ready_line_ = line;
  std::smatch m;
  static const std::regex kReady(R"(^tunableop serve: ready on http://[^:]+:(\d+) \()");
  if (!std::regex_search(line, m, kReady)) {
    if (error_.empty()) error_ = "unexpected first line: " + line;
    return false;
  }
  port_ = std::stoi(m[1]);
  return true;
}

int ServeProcess::stop(int sig, std::chrono::seconds timeout) {
  if (pid_ <= 0) return -3;
  ::kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -2;
    }
    ::usleep(10000);
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace tunableop::testing
