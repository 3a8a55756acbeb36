// Runs the built `tunableop` CLI as a subprocess in a scratch directory, with this process's
// environment except that the TUNABLEOP_* variables are only those a test gives, capturing
// exit code, stdout and stderr.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tunableop::testing {

// The entry lines of a results file's text (or of its .stats sidecar): every line but validators.
inline std::vector<std::string> entry_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l.rfind("Validator,", 0) != 0) out.push_back(l);
  return out;
}

struct CliResult {
  int code = -1;  // exit code; -1 when it did not exit normally
  std::string out, err;
};

class CliRunner {
 public:
  CliRunner() {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("tunableop-cli-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
    // Small budgets: these tests check behaviour, not speed.
    env_ = {{"TUNABLEOP_MAX_TUNING_DURATION_MS", "1"},
            {"TUNABLEOP_MAX_WARMUP_DURATION_MS", "1"},
            {"TUNABLEOP_ROTATING_BUFFER_SIZE", "0"},
            {"TUNABLEOP_SEARCH_EFFORT", "0"},
            {"TUNABLEOP_FILENAME", file("results%d.csv")}};
  }
  ~CliRunner() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  void set_env(const std::string& k, const std::string& v) { env_[k] = v; }
  // A program that runs the CLI (e.g. {"mpirun", "-np", "3"}): argv becomes launcher + CLI + args.
  void set_launcher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(file(name)) << text; }
  std::string read(const std::string& name) const {
    std::ifstream in(file(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Starts the CLI; wait() collects it.
  pid_t start(const std::vector<std::string>& args) {
    std::vector<std::string> argv_s = launcher_;
    argv_s.push_back(TUNABLEOP_CLI_PATH);
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    // This process's environment (library settings such as OPENBLAS_CORETYPE change the
    // validators: a results file must mean the same here and there), without its TUNABLEOP_*.
    std::vector<std::string> envp_s;
    for (char** e = environ; *e; ++e) {
      std::string var(*e);
      if (var.rfind("TUNABLEOP_", 0) != 0 && var.rfind("PYTORCH_TUNABLEOP_", 0) != 0) envp_s.push_back(var);
    }
    for (const auto& [k, v] : env_) envp_s.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    for (auto& e : envp_s) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, file(".stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, file(".stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&fa, dir_.c_str());
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
  }
  CliResult wait(pid_t pid) {
    CliResult r;
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) r.code = WEXITSTATUS(status);
    r.out = read(".stdout");
    r.err = read(".stderr");
    return r;
  }
  CliResult run(const std::vector<std::string>& args) { return wait(start(args)); }

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
  std::vector<std::string> launcher_;
};

}  // namespace tunableop::testing
