// `tunableop show FILE`: a results file as a table, with its validators and what is wrong with it.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli_support.h"
#include "commands.h"
#include "tunableop/results.h"

namespace tunableop::cli {
namespace {

struct ShowArgs {
  std::string file;
  bool stats = false;
};

std::string number(double v) { return fmt::format("{:.6g}", v); }

// A column is padded to its widest cell, but never wider than this, and a cell longer than
// kMaxCell is cut (its length said): an 86-entry file with one 10 MB field printed 912 MB, every
// row padded to that field (issue 33).
constexpr size_t kMaxColumn = 100, kMaxCell = 200;

std::string cut(std::string cell) {
  if (cell.size() <= kMaxCell) return cell;
  const size_t bytes = cell.size();
  size_t at = kMaxCell;
  while (at > 0 && (static_cast<unsigned char>(cell[at]) & 0xC0) == 0x80) --at;  // not inside a UTF-8 character
  cell.resize(at);
  return cell + fmt::format("... ({} bytes)", bytes);
}

// Left-aligned text columns, right-aligned numbers, two spaces apart.
void print_table(const std::vector<std::string>& header, std::vector<std::vector<std::string>> rows,
                 size_t first_numeric_column) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      row[c] = cut(std::move(row[c]));
      width[c] = std::min(std::max(width[c], row[c].size()), std::max(kMaxColumn, header[c].size()));
    }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      line +=
          c < first_numeric_column ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

int show(const ShowArgs& a) {
  auto file = read_results_file(a.file);
  if (!file.is_ok()) {
    fmt::print(stderr, "tunableop show: {}\n", printable(file.status().message()));
    return 2;
  }
  const LoadReport& r = file->report;

  std::string kind = r.ours ? "tunableop results"
                     : r.validators.empty() && r.entries.empty()
                         ? "no results"
                         : "foreign results (not written by tunableop, e.g. PyTorch TunableOp)";
  fmt::print("{}: {}, {} {}\n", printable(a.file), kind, r.entries.size(), r.entries.size() == 1 ? "entry" : "entries");
  if (!r.validators.empty()) {
    fmt::print("\nvalidators{}:\n", r.ours ? "" : " (foreign)");
    size_t w = 0;
    // Everything read from the file is printed through printable(): a results file must not be
    // able to send escape sequences to the terminal of whoever looks at it.
    for (const auto& [k, v] : r.validators) w = std::max(w, printable(k).size());
    for (const auto& [k, v] : r.validators) fmt::print("  {:<{}}  {}\n", printable(k), w, printable(v));
  }

  const bool have_stats = a.stats && file->has_stats;
  if (!r.entries.empty()) {
    fmt::print("\n");
    std::vector<std::string> header = {"op", "params", "solution", "time_ms"};
    if (have_stats) header.insert(header.end(), {"min_ms", "median_ms", "mean_ms", "std_ms", "runs", "tuning_ms"});
    // How the final rounds ran (sustained or burst) and the GPU's clock and power then, where the
    // sidecar says (issue 31).
    const bool have_clock = have_stats && std::any_of(r.entries.begin(), r.entries.end(),
                                                      [](const ResultEntry& e) { return !e.final_rounds.empty(); });
    if (have_clock) header.insert(header.end(), {"final_rounds", "sm_mhz", "power_w"});
    auto reading = [](double v) { return v > 0 ? fmt::format("{:.0f}", v) : std::string("-"); };
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : r.entries) {
      std::vector<std::string> row = {printable(e.op), printable(e.params), printable(e.solution), number(e.time_ms)};
      if (have_stats) {
        if (e.stats) {  // the sidecar's last line for this problem and solution
          const Measurement& m = *e.stats;
          row.insert(row.end(), {number(m.min_ms), number(m.median_ms), number(m.mean_ms), number(m.std_ms),
                                 std::to_string(m.runs), number(e.tuning_ms)});
        } else {
          row.insert(row.end(), 6, "-");
        }
      }
      if (have_clock)
        row.insert(row.end(), {e.final_rounds.empty() ? std::string("-") : printable(e.final_rounds), reading(e.sm_mhz),
                               reading(e.power_w)});
      rows.push_back(std::move(row));
    }
    print_table(header, rows, 3);
    // Notes (the in-context check's drops) under the table: too long for a column.
    if (have_stats)
      for (const auto& e : r.entries)
        if (!e.note.empty())
          fmt::print("note: {},{},{}: {}\n", cut(printable(e.op)), cut(printable(e.params)), cut(printable(e.solution)),
                     cut(printable(e.note)));
  }
  if (a.stats && !file->has_stats) fmt::print("\nno statistics: {} does not exist\n", printable(file->stats_path));

  std::vector<std::string> malformed = r.malformed;
  if (a.stats) malformed.insert(malformed.end(), file->stats_malformed.begin(), file->stats_malformed.end());
  if (!malformed.empty()) {
    fmt::print("\n{} malformed {} (skipped):\n", malformed.size(), malformed.size() == 1 ? "line" : "lines");
    for (const auto& m : malformed) fmt::print("  {}\n", printable(m));
  }
  return 0;
}

}  // namespace

void add_show_command(CLI::App& app) {
  auto a = std::make_shared<ShowArgs>();
  CLI::App* c = app.add_subcommand("show", "Print a results file: validators, one row per tuned problem, bad lines");
  c->add_option("FILE", a->file, "results file (ours or PyTorch TunableOp's)")->required();
  c->add_flag("--stats", a->stats, "add min/median/mean/std/runs/tuning time from the FILE.stats sidecar");
  c->callback([a]() {
    if (int rc = show(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tunableop::cli
