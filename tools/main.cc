// The `tunableop` command-line tool.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tunableop: tune GEMMs by measurement, keep the winners, serve them on every later run"};
  app.require_subcommand(1);
  tunableop::cli::add_bench_command(app);
  tunableop::cli::add_tune_command(app);
  tunableop::cli::add_show_command(app);
  tunableop::cli::add_merge_command(app);
  tunableop::cli::add_llm_command(app);
  tunableop::cli::add_run_command(app);
  tunableop::cli::add_all_reduce_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
