// `tunableop merge A B [more...] -o C`: one results file from several (e.g. one per machine of a
// fleet with identical hardware, or per shard of an offline tuning run).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli_support.h"
#include "commands.h"
#include "tunableop/results.h"

namespace tunableop::cli {
namespace {

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
};

int merge(const MergeArgs& a) {
  if (a.inputs.size() < 2) {
    fmt::print(stderr, "tunableop merge: give at least two results files to merge (got {})\n", a.inputs.size());
    return 2;
  }
  // Hold the output's lock throughout when it exists, so a process tuning into it waits, then
  // notices the replaced file and re-opens it.
  auto out = ResultsFileRewrite::begin(a.output);
  if (!out.is_ok()) {
    fmt::print(stderr, "tunableop merge: -o: {}\n", printable(out.status().message()));
    return 2;
  }
  std::vector<ResultsFileContents> inputs;
  for (const auto& path : a.inputs) {
    auto in = out->read(path);
    if (!in.is_ok()) {
      fmt::print(stderr, "tunableop merge: {}\n", printable(in.status().message()));
      return 2;
    }
    for (const auto& m : in->report.malformed)
      fmt::print(stderr, "warning: skipping malformed line {}\n", printable(m));
    inputs.push_back(std::move(in).value());
  }

  // Lines that cannot be parsed are not in the merge. Replacing an input with it would lose them
  // for good: refused. Another output is written, and the exit code says lines were skipped.
  size_t skipped = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    skipped += inputs[i].report.malformed.size();
    std::error_code ec;
    if (!inputs[i].report.malformed.empty() && std::filesystem::equivalent(a.inputs[i], a.output, ec)) {
      fmt::print(stderr,
                 "tunableop merge: {} has {} line{} that cannot be parsed (above); replacing it with the merge would "
                 "drop them: fix or remove them, or write the merge to another file\n",
                 printable(a.output), inputs[i].report.malformed.size(),
                 inputs[i].report.malformed.size() == 1 ? "" : "s");
      return 1;
    }
  }

  MergedResults merged = merge_results(inputs);
  if (!merged.conflicts.empty()) {
    std::string first;
    for (const auto& in : inputs)
      if (first.empty() && (!in.report.validators.empty() || !in.report.entries.empty())) first = in.path;
    if (!a.force) {
      fmt::print(stderr, "tunableop merge: the inputs were tuned in different environments; validators differ:\n");
      for (const auto& c : merged.conflicts) fmt::print(stderr, "  {}\n", printable(c));
      fmt::print(stderr,
                 "a solution fastest in one environment may be slow or invalid in another; "
                 "use --force to merge anyway (the output keeps the validators of {})\n",
                 first);
      return 1;
    }
    fmt::print(stderr, "warning: --force: merging despite {} differing validators; keeping those of {}\n",
               merged.conflicts.size(), first);
  }
  for (const auto& in : inputs) {
    const auto& r = in.report;
    fmt::print("{}: {} {} ({}){}\n", printable(in.path), r.entries.size(), r.entries.size() == 1 ? "entry" : "entries",
               r.ours ? "tunableop" : "foreign",
               r.malformed.empty() ? "" : fmt::format(", {} malformed lines skipped", r.malformed.size()));
  }
  // A failed write (disk full) leaves the old output whole: the inputs and it are all still there.
  if (Status st = out->replace(merged.validators, merged.entries); !st.is_ok()) {
    fmt::print(stderr, "tunableop merge: {}\n", printable(st.message()));
    return 1;
  }
  fmt::print(
      "wrote {}: {} {} from {} files ({} duplicate {} resolved by keeping the faster time, {} of them from a "
      "later file)\n",
      printable(a.output), merged.entries.size(), merged.entries.size() == 1 ? "entry" : "entries", inputs.size(),
      merged.duplicates, merged.duplicates == 1 ? "entry" : "entries", merged.replaced);
  if (skipped > 0) {
    fmt::print(stderr, "tunableop merge: {} malformed line{} skipped (not in {})\n", skipped, skipped == 1 ? "" : "s",
               printable(a.output));
    return 1;
  }
  return 0;
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  CLI::App* c = app.add_subcommand("merge", "Merge results files; on a problem present in several, keep the faster");
  c->add_option("FILES", a->inputs, "results files to merge (two or more)")->required();
  c->add_option("-o,--output", a->output, "merged results file to write (replaced atomically; may be an input)")
      ->required();
  c->add_flag("--force", a->force, "merge even when the files' validators differ");
  c->callback([a]() {
    if (int rc = merge(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tunableop::cli
