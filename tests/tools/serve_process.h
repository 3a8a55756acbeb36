// `tunableop serve` as a child process for the end-to-end tests: started with a free port
// (--port 0), its ready line read from stdout (the port parsed from it), its stderr kept in a
// file for assertion messages, and stopped with a signal whose exit status is returned.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tunableop::testing {

class ServeProcess {
 public:
  ServeProcess() = default;
  ~ServeProcess();  // SIGKILL if still running
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // A program that runs the CLI (`mpirun -np 2 ...`): argv becomes launcher + CLI + serve ARGS.
  void set_launcher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }
  // Starts `tunableop serve ARGS --port 0` and waits for its ready line. False (with error()
  // saying why) when it exits or stays silent past `timeout`.
  bool start(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(120));
  int port() const { return port_; }
  const std::string& ready_line() const { return ready_line_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and waits for the exit: the exit code, -1 when killed by a signal, -2 on timeout
  // (then killed).
  int stop(int sig, std::chrono::seconds timeout = std::chrono::seconds(60));
  std::string error() const { return error_ + "\nstderr:\n" + stderr_text(); }
  std::string stderr_text() const;

 private:
  std::vector<std::string> launcher_;
  pid_t pid_ = -1;
  int port_ = -1;
  std::string ready_line_, error_, stderr_path_;
};

}  // namespace tunableop::testing
