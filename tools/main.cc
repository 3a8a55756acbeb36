// The `tunableop` command-line tool.
//
// Exit codes: 0 success; 1 the work ran but not all of it succeeded (problems that failed to
// tune, malformed lines skipped, results that could not be saved); 2 bad arguments or input,
// nothing done; 3 an unexpected error (out of memory, an exception from a dependency). Each comes
// with a message on stderr. A command killed by a signal is a bug.
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "commands.h"

namespace {

// CLI11 handles `--help` before it notices that an unknown word is not a subcommand, so
// `tunableop nosuch --help` would print help and exit 0; the first word that is not an option
// must name a command.
bool check_command(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!a.empty() && a[0] == '-') continue;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == a) return true;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "tunableop: unknown command '%s' (commands: %s)\n", a.c_str(), names.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit (ulimit -f) then makes write(2) fail with EFBIG, which is reported and
  // reflected in the exit code, instead of killing the process in the middle of a write.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    CLI::App app{"tunableop: tune GEMMs by measurement, keep the winners, serve them on every later run"};
    app.require_subcommand(1);
    tunableop::cli::add_bench_command(app);
    tunableop::cli::add_tune_command(app);
    tunableop::cli::add_show_command(app);
    tunableop::cli::add_merge_command(app);
    tunableop::cli::add_llm_command(app);
    tunableop::cli::add_run_command(app);
    tunableop::cli::add_all_reduce_command(app);
    tunableop::cli::add_serve_command(app);
    if (!check_command(app, argc, argv)) return 2;
    try {
      app.parse(argc, argv);
    } catch (const CLI::RuntimeError& e) {
      return e.get_exit_code();  // a command's own failure: it printed why
    } catch (const CLI::ParseError& e) {
      // Usage errors print their message (help prints itself and gives 0); any of them is 2.
      return app.exit(e) == 0 ? 0 : 2;
    }
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tunableop: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tunableop: unexpected error: %s\n", e.what());
    return 3;
  } catch (...) {
    std::fprintf(stderr, "tunableop: unexpected error\n");
    return 3;
  }
  return 0;
}
