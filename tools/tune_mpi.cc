// `mpirun -np N tunableop tune FILE [--device cuda] [--gpus all]`: offline tuning over MPI.
//
// Rank 0 reads FILE (only rank 0 needs it) and the results file, and sends every rank the
// problems that have no result yet; rank r tunes those with index % N == r on its own device
// (a GPU chosen by its rank on the machine, or --gpu, or all of them with --gpus) into a results
// file of its own, "<results>.rank<r>.csv", appended as each result is found. At the end every
// rank sends its file's entries to rank 0, which merges them into the results file (the public
// results API: read_results_file, merge_results, ResultsFileRewrite) and tells the ranks to
// remove their files.
//
// A rank that dies (and with it the job: mpirun ends the others) loses only the problem it was
// tuning: what any rank found is in its rank file, and the next run first gathers every rank
// file left behind into the results file, then tunes only what is still missing.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "mpi_group.h"
#include "tunableop/context.h"
#include "tunableop/results.h"
#include "tune.h"

#ifdef TUNABLEOP_HAVE_MPI
// The C API only (OpenMPI's and MPICH's mpi.h pull in the removed C++ bindings otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tunableop::cli {

void unbind_from_mpi_launcher(const TuneArgs& a) {
  bool launched = false;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) launched |= std::getenv(v) != nullptr;
  if (!launched || a.device != "cpu" || !a.gpus.empty()) return;
  cpu_set_t all;
  CPU_ZERO(&all);
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < std::min<long>(n > 0 ? n : CPU_SETSIZE, CPU_SETSIZE); ++c) CPU_SET(int(c), &all);
  (void)sched_setaffinity(0, sizeof(all), &all);  // the kernel keeps it within the cgroup's cpuset
}

int mpi_launch_size() { return mpi_launch().size; }

#ifndef TUNABLEOP_HAVE_MPI

int tune_mpi(const TuneArgs& a) {
  // The rank this process has in its launcher's job, from the environment.
  if (mpi_launch().rank != 0) return 0;
  fmt::print(stderr,
             "tunableop tune: launched by an MPI launcher ({} processes) but this tunableop was built without MPI "
             "(OpenMPI's libopenmpi-dev was not found at configure time): rank 0 tunes every problem alone, the other "
             "ranks do nothing\n",
             mpi_launch_size());
  TuneArgs one = a;
  one.fanout_child = true;
  if (!a.gpus.empty()) {
    auto gpus = resolve_gpus(a.gpus);
    if (!gpus.is_ok()) fmt::print(stderr, "tunableop tune: {}\n", gpus.status().message());
    if (!gpus.is_ok() || gpus->empty()) return 2;
    return tune_all_gpus(one, *gpus);
  }
  int bad = 0;
  auto problems = read_problems(a.file, bad);
  if (!problems.is_ok()) {
    fmt::print(stderr, "tunableop tune: {}\n", problems.status().message());
    return 2;
  }
  return tune_problems(one, a.device == "cuda" ? Device::cuda(a.gpu) : Device::cpu(), *problems, bad);
}

#else

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "<stem>.rank<r><ext>" of a results file pattern ("%d" kept for the device ordinal).
std::string rank_pattern(const std::string& pattern, int rank) {
  const size_t slash = pattern.find_last_of('/');
  const size_t dot = pattern.find_last_of('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return pattern + tag;
  return pattern.substr(0, dot) + tag + pattern.substr(dot);
}

// The results file a context on `dev` uses for `pattern` (the "<stem>.env-<hash>" sibling when
// the named file belongs to another environment), and that environment's validators.
struct ActiveFile {
  std::string path;
  Validators validators;
};
ActiveFile active_file(const std::string& pattern, Device dev) {
  Context ctx(dev);
  (void)ctx.config().set(Setting::kFilename, pattern);
  (void)ctx.load_results();
  return {ctx.results_path(), ctx.current_validators()};
}

// --- MPI helpers: strings from every rank to rank 0, and from rank 0 to every rank.

std::vector<std::string> gather_strings(const std::string& mine, int rank, int size) {
  int len = int(mine.size());
  std::vector<int> lens(size_t(size), 0), offsets(size_t(size), 0);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) offsets[size_t(r)] = total, total += lens[size_t(r)];
    all.resize(size_t(total));
  }
  MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lens[size_t(r)])));
  return out;
}

std::string broadcast_string(std::string s) {
  int len = int(s.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  s.resize(size_t(len));
  MPI_Bcast(s.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return s;
}

// --- A rank's results files as one message: [{path, validators, entries}], statistics included.

json entry_json(const ResultEntry& e) {
  json j = {
      {"op", e.op}, {"params", e.params}, {"solution", e.solution}, {"time_ms", e.time_ms}, {"tuning_ms", e.tuning_ms}};
  if (e.stats) {
    const Measurement& m = *e.stats;
    j["stats"] = {m.min_ms, m.median_ms, m.mean_ms, m.std_ms, m.runs};
  }
  return j;
}

ResultEntry entry_from_json(const json& j) {
  ResultEntry e;
  e.op = j.at("op").get<std::string>();
  e.params = j.at("params").get<std::string>();
  e.solution = j.at("solution").get<std::string>();
  e.time_ms = j.at("time_ms").get<double>();
  e.tuning_ms = j.value("tuning_ms", 0.0);
  if (j.contains("stats")) {
    const json& s = j["stats"];
    e.stats =
        Measurement{s[0].get<double>(), s[1].get<double>(), s[2].get<double>(), s[3].get<double>(), s[4].get<int>()};
  }
  return e;
}

// Reads this rank's files that exist; `found` gets their paths (removed once merged). MessagePack,
// not JSON text: paths and fields are bytes, and a results file name that is not UTF-8 made JSON's
// dump() throw after the tuning (exit 3), and again on every later run (issue 33).
std::string rank_files_message(const std::vector<std::string>& paths, std::vector<std::string>* found) {
  json files = json::array();
  for (const std::string& path : paths) {
    auto c = read_results_file(path);
    if (!c.is_ok()) {
      if (c.status().code() != StatusCode::kNotFound)
        fmt::print(stderr, "tunableop tune: cannot read {}: {}\n", path, c.status().message());
      continue;
    }
    found->push_back(path);
    json entries = json::array();
    for (const ResultEntry& e : c->report.entries) entries.push_back(entry_json(e));
    files.push_back({{"path", path}, {"validators", c->report.validators}, {"entries", entries}});
  }
  const std::vector<uint8_t> bytes = json::to_msgpack(files);
  return std::string(bytes.begin(), bytes.end());
}

// Rank files of an earlier run with more ranks (".rank<N>" with N >= size) beside `pattern`'s
// file for `dev`: no rank of this run reads them otherwise (issue 33).
std::vector<std::string> leftover_rank_files(const std::string& pattern, Device dev, int size) {
  const std::string ordinal = std::to_string(dev.ordinal);
  const fs::path first = results_path_for(rank_pattern(pattern, 0), ordinal);
  const fs::path dir = first.has_parent_path() ? first.parent_path() : fs::path(".");
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (size_t at = name.find(".rank"); at != std::string::npos; at = name.find(".rank", at + 1)) {
      size_t digits = at + 5, stop = digits;
      while (stop < name.size() && stop - digits < 9 && std::isdigit(static_cast<unsigned char>(name[stop]))) ++stop;
      if (stop == digits) continue;
      const int n = std::stoi(name.substr(digits, stop - digits));
      if (n >= size && fs::path(results_path_for(rank_pattern(pattern, n), ordinal)).filename() == name)
        out.push_back((dir / name).string());
    }
  }
  return out;
}

// Rank 0: every rank file of the messages whose validators are `current` (others are reported
// and left where they are); `merged_ranks[r]` says whether all of rank r's files were taken.
// With `leftovers`, the last message holds rank 0's leftover files of an earlier, larger run.
std::vector<ResultsFileContents> usable_rank_files(const std::vector<std::string>& messages, const Validators& current,
                                                   std::vector<int>* merged_ranks, size_t* entries,
                                                   bool leftovers = false) {
  std::vector<ResultsFileContents> out;
  merged_ranks->assign(messages.size(), 1);
  for (size_t r = 0; r < messages.size(); ++r) {
    json files = json::from_msgpack(messages[r], true, false);
    if (files.is_discarded() || !files.is_array()) {
      fmt::print(stderr, "tunableop tune: rank {} sent an unreadable message; its files are left as they are\n", r);
      (*merged_ranks)[r] = 0;
      continue;
    }
    for (const json& f : files) {
      ResultsFileContents c;
      c.path = r < messages.size() - 1 || !leftovers ? fmt::format("rank {}: {}", r, f.at("path").get<std::string>())
                                                     : f.at("path").get<std::string>();
      c.report.path = c.report.active_path = c.path;
      c.report.existed = c.report.ours = true;
      c.report.validators = f.at("validators").get<Validators>();
      for (const json& e : f.at("entries")) c.report.entries.push_back(entry_from_json(e));
      if (c.report.entries.empty()) continue;
      if (c.report.validators != current) {
        fmt::print(stderr,
                   "tunableop tune: {} was tuned in another environment (its validators differ from rank 0's): its {} "
                   "results stay in that file\n",
                   c.path, c.report.entries.size());
        (*merged_ranks)[r] = 0;
        continue;
      }
      *entries += c.report.entries.size();
      out.push_back(std::move(c));
    }
  }
  return out;
}

// Rank 0: merges `extra` into the results file `path` (validators `current`) and rewrites it;
// returns the entries now in it.
StatusOr<std::vector<ResultEntry> > merge_into(const std::string& path, const Validators& current,
                                               std::vector<ResultsFileContents> extra) {
  auto rw = ResultsFileRewrite::begin(path);
  if (!rw.is_ok()) return rw.status();
  std::vector<ResultsFileContents> inputs;
  auto main = rw->read(path);
  if (main.is_ok()) {
    inputs.push_back(std::move(main).value());
  } else if (main.status().code() != StatusCode::kNotFound) {
    return main.status();
  }
  const bool changes = !extra.empty();
  for (auto& e : extra) inputs.push_back(std::move(e));
  if (inputs.empty()) return std::vector<ResultEntry>{};
  MergedResults merged = merge_results(inputs);
  if (changes) TUNABLEOP_RETURN_IF_ERROR(rw->replace(current, merged.entries));
  return merged.entries;
}

std::string problems_text(const std::vector<Problem>& ps) {
  std::string s;
  for (const auto& [op, params] : ps) s += op + "," + params + "\n";
  return s;
}

std::vector<Problem> problems_from_text(const std::string& s) {
  std::vector<Problem> out;
  size_t at = 0;
  while (at < s.size()) {
    size_t nl = s.find('\n', at), comma = s.find(',', at);
    out.emplace_back(s.substr(at, comma - at), s.substr(comma + 1, nl - comma - 1));
    at = nl + 1;
  }
  return out;
}

void remove_rank_files(const std::vector<std::string>& paths) {
  std::error_code ec;
  for (const std::string& p : paths) {
    fs::remove(p, ec);
    fs::remove(p + ".stats", ec);
  }
}

[[noreturn]] void abort_job(const std::string& why) {
  fmt::print(stderr, "tunableop tune: {}\n", why);
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

}  // namespace

int tune_mpi(const TuneArgs& args) {
  setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);  // --gpus forks one child per GPU
  MPI_Init(nullptr, nullptr);
  int rank = 0, size = 1, local_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);

  // This rank's device(s): --gpus (every GPU of its machine it names), --gpu, or the GPU of its
  // rank on the machine; the CPU otherwise.
  TuneArgs a = args;
  std::vector<Device> devices;
  if (!a.gpus.empty()) {
    auto gpus = resolve_gpus(a.gpus);
    if (!gpus.is_ok()) abort_job(fmt::format("rank {} on {}: {}", rank, host, gpus.status().message()));
    for (int g : *gpus) devices.push_back(Device::cuda(g));
    if (devices.empty()) abort_job(fmt::format("rank {} on {}: --gpus {}: no CUDA device found", rank, host, a.gpus));
  } else if (a.device == "cuda") {
    int count = 0;
    Context probe(Device::cuda(0));
    if (const DeviceRuntime* rt = probe.registry().runtime(DeviceKind::kCuda)) count = rt->device_count();
    if (count == 0) abort_job(fmt::format("rank {} on {}: no CUDA device", rank, host));
    devices.push_back(Device::cuda(a.gpu_given ? a.gpu : local_rank % count));
  } else if (a.device == "cpu") {
    devices.push_back(Device::cpu());
  } else {
    abort_job("--device must be cpu or cuda");
  }

  const std::string pattern = Context(devices[0]).options().filename;
  const std::string mine_pattern = rank_pattern(pattern, rank);
  std::vector<std::string> my_files;
  for (Device d : devices) my_files.push_back(active_file(mine_pattern, d).path);

  // 1. What earlier runs left in rank files goes into the results file first.
  std::vector<std::string> found;
  std::vector<std::string> messages = gather_strings(rank_files_message(my_files, &found), rank, size);
  std::vector<int> merged_ranks;
  std::string todo_text, status_text = "ok";
  ActiveFile main;
  size_t picked_up = 0, total = 0, bad_lines = 0;
  std::vector<std::string> leftovers;
  bool leftovers_merged = false;
  if (rank == 0) {
    main = active_file(pattern, devices[0]);
    // Rank files of an earlier run with more ranks: gathered here, as one more rank's message.
    messages.push_back(rank_files_message(leftover_rank_files(pattern, devices[0], size), &leftovers));
    auto usable = usable_rank_files(messages, main.validators, &merged_ranks, &picked_up, /*leftovers=*/true);
    leftovers_merged = merged_ranks.back() != 0;
    merged_ranks.pop_back();
    auto entries = merge_into(main.path, main.validators, std::move(usable));
    if (!entries.is_ok()) {
      status_text = entries.status().message();
    } else {
      std::set<Problem> done;
      for (const ResultEntry& e : *entries) done.insert({e.op, e.params});
      int bad = 0;
      auto read = read_problems(a.file, bad);
      if (!read.is_ok()) status_text = read.status().message();
      std::vector<Problem> problems = read.is_ok() ? *read : std::vector<Problem>{}, todo;
      bad_lines = size_t(bad);
      total = problems.size();
      for (const Problem& p : problems)
        if (a.retune || !done.count(p)) todo.push_back(p);
      todo_text = problems_text(todo);
      fmt::print(
          "mpi: {} problems in {}; {} already tuned ({} results picked up from rank files of an earlier run); "
          "{} to tune on {} ranks\n",
          total, a.file, total - todo.size(), picked_up, todo.size(), size);
      std::fflush(stdout);
    }
  }
  status_text = broadcast_string(status_text);
  if (status_text != "ok") {
    fmt::print(stderr, "tunableop tune: rank 0 cannot update the results file: {}\n", status_text);
    MPI_Finalize();
    return 2;
  }
  merged_ranks.resize(size_t(size));
  MPI_Bcast(merged_ranks.data(), size, MPI_INT, 0, MPI_COMM_WORLD);
  if (merged_ranks[size_t(rank)]) remove_rank_files(found);
  if (leftovers_merged) remove_rank_files(leftovers);
  std::vector<Problem> todo = problems_from_text(broadcast_string(todo_text));

  // 2. This rank's share, into its own file (appended as each result is found).
  std::vector<Problem> share;
  for (size_t i = 0; i < todo.size(); ++i)
    if (int(i % size_t(size)) == rank) share.push_back(todo[i]);
  setenv("TUNABLEOP_FILENAME", mine_pattern.c_str(), 1);
  int rc = 0;
  if (!share.empty()) {
    std::string where;
    for (Device d : devices) where += (where.empty() ? "" : ",") + d.to_string();
    fmt::print("mpi rank {}/{} on {} ({}): tuning {} problems into {}\n", rank, size, host, where, share.size(),
               fmt::join(my_files, ", "));
    std::fflush(stdout);
    a.fanout_child = true;
    if (!a.gpus.empty()) {
      // tune_all_gpus reads its problems from a file: this rank's share, written beside its results.
      a.file = my_files[0] + ".todo";
      std::ofstream(a.file) << problems_text(share);
      std::vector<int> gpus;
      for (Device d : devices) gpus.push_back(d.ordinal);
      rc = tune_all_gpus(a, gpus);
      std::error_code ec;
      fs::remove(a.file, ec);
    } else {
      rc = tune_problems(a, devices[0], share, 0, rank == a.exit_rank ? a.exit_after : -1);
    }
  }

  // 3. Every rank's results to rank 0, merged into the results file; then the rank files go.
  found.clear();
  messages = gather_strings(rank_files_message(my_files, &found), rank, size);
  status_text = "ok";
  if (rank == 0) {
    size_t gathered = 0;
    auto usable = usable_rank_files(messages, main.validators, &merged_ranks, &gathered);
    // With --gpus, every GPU of rank 0's machine gets the merged file (as `tune --gpus` does).
    std::set<std::string> targets = {main.path};
    for (Device d : devices) {
      ActiveFile f = active_file(pattern, d);
      if (f.validators == main.validators) targets.insert(f.path);
    }
    for (const std::string& path : targets) {
      auto entries = merge_into(path, main.validators, usable);
      if (!entries.is_ok()) {
        status_text = entries.status().message();
        break;
      }
      fmt::print("mpi: merged {} results from {} ranks into {} ({} entries)\n", gathered, size, path, entries->size());
    }
  }
  status_text = broadcast_string(status_text);
  if (status_text != "ok") {
    fmt::print(stderr, "tunableop tune: rank 0 could not write the merged results ({}); rank files are kept\n",
               status_text);
    rc = 2;
  } else {
    MPI_Bcast(merged_ranks.data(), size, MPI_INT, 0, MPI_COMM_WORLD);
    if (merged_ranks[size_t(rank)]) remove_rank_files(found);
  }
  if (rank == 0 && bad_lines) rc = std::max(rc, 1);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}

#endif  // TUNABLEOP_HAVE_MPI

}  // namespace tunableop::cli
