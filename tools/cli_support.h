// Small pieces every subcommand uses: option checks with plain messages, terminal-safe printing
// of text that comes from files, and the report of results that could not be saved.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tunableop/context.h"

namespace tunableop::cli {

// For integer options: "--batch: must be >= 1 (got 0)". (CLI11's PositiveNumber prints its
// range as a 300-digit number.) Values that are not numbers are left to CLI11's conversion.
CLI::Validator at_least(int64_t lo);

// "0,2,3" -> {0, 2, 3}; InvalidArgument naming the bad item otherwise.
StatusOr<std::vector<int>> parse_gpu_list(const std::string& list);

// Text from a file, safe to print: control bytes (ESC, CR, BEL, ..., DEL, C1 controls) and bytes
// that are not UTF-8 become \xNN, a backslash becomes \\, valid UTF-8 stays as it is. A results
// file must not be able to move the cursor or rewrite the terminal of whoever shows it.
std::string printable(std::string_view text);

// Results the context tuned but could not write to its results file: prints how many and why,
// and the lines themselves (so nothing tuned is lost: they can be appended to the file once it is
// writable). Returns true when there were any (the command then exits 1).
bool report_unsaved(Context& ctx, const char* command);

}  // namespace tunableop::cli
