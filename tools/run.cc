// `tunableop run [--tune | --no-tune | --record] [--results FILE] -- CMD ARGS...`: runs an
// unmodified program with the interposer preloaded (docs/interpose.md). It only sets the
// environment (LD_PRELOAD and the TUNABLEOP_* settings) and replaces itself with the command, so
// exit status and signals are the command's own.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"

namespace tunableop::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
  bool tune = false, no_tune = false, record = false;
  std::string results;
  int verbose = -1;
  std::vector<std::string> command;
};

constexpr const char* kPreloadName = "libtunableop_preload.so";

// The preload library: TUNABLEOP_PRELOAD_LIBRARY, else beside this executable's build tree
// (build/tools -> build/src/interpose) or its installed lib directory.
std::string find_preload_library(std::string* tried) {
  if (const char* env = std::getenv("TUNABLEOP_PRELOAD_LIBRARY")) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path bin = exe.parent_path();
  std::vector<fs::path> candidates = {bin / "../src/interpose", bin / "../lib", bin / "../lib64"};
  for (const auto& entry : fs::directory_iterator(bin / "../lib", ec))  // lib/<multiarch>/
    if (entry.is_directory(ec)) candidates.push_back(entry.path());
  for (const auto& dir : candidates) {
    fs::path p = dir / kPreloadName;
    *tried += (tried->empty() ? "" : ", ") + p.lexically_normal().string();
    if (fs::exists(p, ec)) return fs::canonical(p, ec).string();
  }
  return "";
}

void set_env(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

int run(const RunArgs& a) {
  if (a.command.empty()) {
    fmt::print(stderr, "tunableop run: no command given (usage: tunableop run [options] -- CMD ARGS...)\n");
    return 2;
  }
  std::string tried;
  std::string preload = find_preload_library(&tried);
  if (preload.empty() || access(preload.c_str(), R_OK) != 0) {
    fmt::print(stderr, "tunableop run: cannot find {} (looked at: {}); set TUNABLEOP_PRELOAD_LIBRARY\n", kPreloadName,
               preload.empty() ? tried : preload);
    return 1;
  }
  // Keep whatever the caller preloads already; ours goes first so that its hooks win.
  std::string ld_preload = preload;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) ld_preload += std::string(":") + old;
  set_env("LD_PRELOAD", ld_preload);
  set_env("TUNABLEOP_ENABLED", "1");
  if (a.tune) set_env("TUNABLEOP_TUNING", "1");
  if (a.no_tune || a.record) set_env("TUNABLEOP_TUNING", "0");
  if (a.record) set_env("TUNABLEOP_RECORD_UNTUNED", "1");
  if (!a.results.empty()) set_env("TUNABLEOP_FILENAME", a.results);
  if (a.verbose >= 0) set_env("TUNABLEOP_VERBOSE", std::to_string(a.verbose));
  if (const char* pt = std::getenv("PYTORCH_TUNABLEOP_ENABLED"); pt && std::strcmp(pt, "0") != 0)
    fmt::print(stderr,
               "tunableop run: note: PYTORCH_TUNABLEOP_ENABLED={} also turns on PyTorch's own TunableOp; its "
               "choices are replaced by ours\n",
               pt);
  std::vector<char*> argv;
  for (const auto& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::signal(SIGXFSZ, SIG_DFL);  // main() ignores it for our own writes; the program gets its own
  execvp(argv[0], argv.data());
  int err = errno;
  fmt::print(stderr, "tunableop run: cannot run {}: {}\n", a.command[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;  // the shell's codes for "not found" / "cannot execute"
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand(
      "run", "Run an unmodified program with its BLAS/cuBLAS/cuBLASLt GEMMs tuned and served (LD_PRELOAD)");
  auto* tune = c->add_flag("--tune", a->tune, "tune problems not in the results (the default)");
  auto* no_tune = c->add_flag("--no-tune", a->no_tune, "serve known results only; others go to the library");
  auto* record = c->add_flag("--record", a->record,
                             "serve known results, record the others in the untuned file for `tunableop tune`");
  tune->excludes(no_tune, record);
  no_tune->excludes(record);
  c->add_option("--results", a->results, "results file (TUNABLEOP_FILENAME; %d = device ordinal)");
  c->add_option("-v,--verbose", a->verbose, "TUNABLEOP_VERBOSE: 1 = a summary of served/passed calls at exit")
      ->check(CLI::Range(0, 3));
  c->add_option("command", a->command, "the program and its arguments, after --")->required();
  c->callback([a]() {
    // Only returns when the command could not be started.
    throw CLI::RuntimeError(run(*a));
  });
}

}  // namespace tunableop::cli
