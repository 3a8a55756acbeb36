// Fuzzes the results-file parser and the file logic around it: any text as a results file (and as
// its .stats sidecar) must parse without a crash; what we format must parse back to the same
// thing; and appending into a file of that text must keep the new result findable, without
// touching a file that belongs to another environment.
#include <cstdint>
#include <string>

#include "core/results_stats.h"
#include "fuzz_util.h"
#include "tunableop/results.h"

using namespace tunableop;
using tunableop::fuzz::scratch_dir;

namespace {

const Validators kEnv = {{"TUNABLEOP_VERSION", "0.1.0"}, {"CPU", "fuzz cpu avx2 2 cores"}};

void check_round_trip(const LoadReport& r) {
  for (const ResultEntry& e : r.entries) {
    LoadReport again = parse_results(format_entry(e), "again");
    FUZZ_CHECK(again.entries.size() == 1 && again.malformed.empty(), "entry '%s,%s' did not format to one line",
               e.op.c_str(), e.params.c_str());
    const ResultEntry& a = again.entries[0];
    FUZZ_CHECK(a.op == sanitize_field(e.op) && a.params == sanitize_field(e.params) &&
                   a.solution == sanitize_field(e.solution),
               "entry fields changed on a round trip");
  }
  // Sanitizing may make two keys equal ("a\rb" and "a b"), so only the count is bounded.
  LoadReport v = parse_results(format_validators(r.validators), "again");
  FUZZ_CHECK(v.validators.size() <= r.validators.size(), "validators did not round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  LoadReport r = parse_results(text, "fuzz.csv");
  check_round_trip(r);
  std::vector<std::string> malformed;
  (void)parse_stats(text, "fuzz.csv.stats", &malformed);

  // The same text as a file on disk, then one append through ResultsFile.
  tunableop::fuzz::clear_scratch();
  const std::string path = scratch_dir() + "/results.csv";
  tunableop::fuzz::write_file(path, text);
  ResultsFile f(path, kEnv);
  auto opened = f.open();
  if (!opened.is_ok()) return 0;  // e.g. every sibling taken: reported, not a crash
  ResultEntry e{
      "GemmTunableOp_float_NN", "nn_7_5_3", "Gemm_Fuzz", 0.25, Measurement{0.2, 0.25, 0.3, 0.01, 9}, 1.5, 0, ""};
  if (!f.append(e).is_ok()) return 0;
  if (f.path() != path) {
    FUZZ_CHECK(tunableop::fuzz::read_file(path) == text, "a file of another environment was modified");
  }
  ResultsFile g(path, kEnv);
  auto again = g.open();
  FUZZ_CHECK(again.is_ok(), "re-open failed: %s", again.status().to_string().c_str());
  FUZZ_CHECK(g.path() == f.path(), "the same environment found another file: %s vs %s", g.path().c_str(),
             f.path().c_str());
  bool found = false;
  for (const auto& x : again->entries) found |= x.op == e.op && x.params == e.params;
  FUZZ_CHECK(found, "the appended result is not in %s", g.path().c_str());
  return 0;
}
