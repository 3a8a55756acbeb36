// Each subcommand of the `tunableop` CLI lives in its own file and adds itself to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace tunableop::cli {

void add_bench_command(CLI::App& app);          // bench.cc
void add_tune_command(CLI::App& app);           // tune.cc
void add_show_command(CLI::App& app);           // show.cc
void add_merge_command(CLI::App& app);          // merge.cc
void add_llm_command(CLI::App& app);            // llm_command.cc
void add_run_command(CLI::App& app);            // run.cc
void add_all_reduce_command(CLI::App& app);     // all_reduce_command.cc
void add_serve_command(CLI::App& app);          // serve_command.cc
void add_bench_serve_command(CLI::App& bench);  // bench_serve.cc: `bench serve`, under `bench`

}  // namespace tunableop::cli
