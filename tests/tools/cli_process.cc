#include "cli_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace tunableop::testing {

CliRun run_cli(const std::vector<std::string>& args, const CliOptions& o) {
  CliRun r;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return r;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string v(*e);
    if (v.rfind("TUNABLEOP_", 0) == 0 || v.rfind("PYTORCH_TUNABLEOP_", 0) == 0) continue;
    env.push_back(v);
  }
  // Quick tuning: these tests are about errors, not about which kernel wins.
  for (const char* v : {"TUNABLEOP_MAX_TUNING_ITERATIONS=2", "TUNABLEOP_MAX_WARMUP_ITERATIONS=1",
                        "TUNABLEOP_ROTATING_BUFFER_SIZE=0", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"})
    env.push_back(v);
  for (const auto& v : o.env) env.push_back(v);
  std::vector<char*> argv, envp;
  std::string bin = TUNABLEOP_CLI_PATH;
  argv.push_back(bin.data());
  std::vector<std::string> args_copy = args;
  for (auto& a : args_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
    if (o.file_size_limit) {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit lim{};
      ::getrlimit(RLIMIT_FSIZE, &lim);
      lim.rlim_cur = rlim_t(o.file_size_limit);
      ::setrlimit(RLIMIT_FSIZE, &lim);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, int(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, size_t(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  r.max_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string describe(const CliRun& r) {
  return "exit " + std::to_string(r.exit_code) + ", signal " + std::to_string(r.signal) +
         (r.timed_out ? " (timed out)" : "") + "\n--- stdout:\n" + r.out + "--- stderr:\n" + r.err;
}

}  // namespace tunableop::testing
