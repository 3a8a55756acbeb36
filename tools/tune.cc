// `tunableop tune FILE`: tune every problem of an untuned file (offline tuning: its GEMM and
// ScaledGemm lines), on one device or on all GPUs at once (one process per GPU, each writing
// only its own results file), or across the ranks of an MPI job (tune_mpi.cc).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli_support.h"
#include "commands.h"
#include "tunableop/gemm.h"
#include "tunableop/in_context.h"
#include "tunableop/op_tools.h"
#include "tunableop/results.h"
#include "tunableop/scaled_gemm.h"
#include "tune.h"

namespace tunableop::cli {

namespace {

void progress(size_t done, size_t total, double elapsed_s, const std::string& what, bool tty) {
  double eta = done ? elapsed_s / double(done) * double(total - done) : 0;
  if (!tty) {
    fmt::print("[{}/{}] {} (elapsed {:.1f}s, eta {:.1f}s)\n", done, total, what, elapsed_s, eta);
    std::fflush(stdout);
    return;
  }
  const int width = 30;
  int filled = total ? int(double(width) * double(done) / double(total)) : width;
  fmt::print(stderr, "\r[{}{}] {}/{} eta {:5.1f}s {:<40.40}", std::string(size_t(filled), '#'),
             std::string(size_t(width - filled), '.'), done, total, eta, what);
  if (done == total) fmt::print(stderr, "\n");
}

// One line of the file tuned by its op (PyTorch's names): ScaledGemm's or GEMM's. A line that
// does not parse fails with kParseError.
StatusOr<TuningReport> tune_line(Context& ctx, const std::string& op, const std::string& params, bool retune) {
  if (op.rfind(kScaledGemmOpPrefix, 0) == 0) {
    auto p = parse_scaled_gemm_signature(op, params);
    if (!p.is_ok()) return p.status();
    return OpTools<ScaledGemmOp>::tune(ctx, *p, retune);
  }
  auto p = parse_gemm_signature(op, params);
  if (!p.is_ok()) return p.status();
  return OpTools<GemmOp>::tune(ctx, *p, retune);
}

}  // namespace

StatusOr<std::vector<Problem>> read_problems(const std::string& path, int& bad) {
  // Read as every file is (tunableop/safe_file.h): never blocking on a FIFO, regular files only.
  std::vector<std::string> malformed;
  auto out = UntunedFile::read_problems(path, &malformed);
  for (const auto& m : malformed) fmt::print(stderr, "tunableop tune: skipping malformed line {}\n", printable(m));
  bad += int(malformed.size());
  return out;
}

// The in-context check on a recorded file: the file's GEMMs, each once in file order on its own
// random operands, are the workload (a recorded file keeps no call counts or order beyond
// that, so this is the program's sequence of problems, not its timing).
Status check_recorded_workload(Context& ctx, const DeviceRuntime& rt,
                               const std::vector<std::pair<std::string, std::string>>& problems) {
  struct Step {
    GemmParams p;
    std::unique_ptr<RandomOperands<GemmOp>> buffers;
  };
  std::vector<Step> steps;
  for (const auto& [op, params] : problems) {
    auto p = parse_gemm_signature(op, params);
    if (!p.is_ok()) continue;
    auto b = RandomOperands<GemmOp>::make(ctx, *p, 1, nullptr);
    if (!b.is_ok()) return b.status();
    steps.push_back({*p, std::move(*b)});
  }
  (void)ctx.config().set(Setting::kEnabled, true);  // the tuned choices, as the program will run them
  int passes = 1;
  auto workload = [&]() -> Status {
    for (int i = 0; i < passes; ++i)
      for (auto& s : steps) TUNABLEOP_RETURN_IF_ERROR(gemm(ctx, s.p, s.buffers->operands()));
    return rt.synchronize ? rt.synchronize(nullptr) : Status::ok();
  };
  // Small problems make a pass of microseconds: repeat it to about 20 ms per timed sample.
  TUNABLEOP_RETURN_IF_ERROR(workload());
  const auto t0 = std::chrono::steady_clock::now();
  TUNABLEOP_RETURN_IF_ERROR(workload());
  const double pass_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  passes = int(std::clamp(20.0 / std::max(pass_ms, 1e-3), 1.0, 1000.0));
  auto r = check_in_context(ctx, workload);
  if (!r.is_ok()) return r.status();
  fmt::print("In-context check: {} ({} runs, {:.1f} s)\n", r->summary(), r->workload_runs, r->elapsed_ms / 1e3);
  return Status::ok();
}

int tune_problems(const TuneArgs& a, Device dev, const std::vector<Problem>& lines, int bad, int exit_after) {
  Context ctx(dev);
  if (a.verbose >= 0) (void)ctx.config().set(Setting::kVerbose, a.verbose);
  const DeviceRuntime* rt = ctx.registry().runtime(dev.kind);
  if (!rt) {
    fmt::print(stderr, "tunableop tune: {} is not available in this build or machine\n", dev.to_string());
    return 2;
  }
  if (Status st = rt->set_device(dev.ordinal); !st.is_ok()) {
    fmt::print(stderr, "tunableop tune: {}\n", st.to_string());
    return 2;
  }
  // Tuning is for the results file: when it cannot be used (a directory, a FIFO, a name ending
  // in '/', ...), say so now instead of tuning for an hour and keeping nothing.
  if (Status st = ctx.load_results(); !st.is_ok()) {
    fmt::print(stderr, "tunableop tune: cannot use the results file: {}; nothing tuned\n", printable(st.message()));
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> mine;
  for (size_t i = 0; i < lines.size(); ++i)
    if (int(i % size_t(a.shards)) == a.shard) mine.push_back(lines[i]);
  const bool tty = isatty(fileno(stderr)) && a.shards == 1;
  auto t0 = std::chrono::steady_clock::now();
  int failed = 0, skipped = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto& [op, params] = mine[i];
    std::string what = op + "," + params;
    if (!a.retune && ctx.results().contains(op, params)) {
      ++skipped;
    } else if (auto rep = tune_line(ctx, op, params, a.retune); !rep.is_ok()) {
      if (rep.status().code() == StatusCode::kParseError) {
        fmt::print(stderr, "tunableop tune: skipping: {}\n", printable(rep.status().message()));
      } else {
        fmt::print(stderr, "tunableop tune: {}: {}\n", printable(what), printable(rep.status().to_string()));
      }
      ++failed;
    } else {
      what += " -> " + rep->winner.solution;
    }
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress(i + 1, mine.size(), el, printable(what), tty);
    if (exit_after >= 0 && int(i + 1) >= exit_after) {
      fmt::print(stderr, "tunableop tune: test hook: leaving after {} problems\n", i + 1);
      std::fflush(stdout);
      _exit(3);
    }
  }
  size_t unsaved = 0;
  for (const auto& u : ctx.unsaved_results()) unsaved += !u.line_written;
  fmt::print("{}: tuned {} problems ({} not saved, {} already tuned, {} failed, {} malformed lines skipped) into {}\n",
             dev.to_string(), mine.size() - size_t(skipped) - size_t(failed), unsaved, skipped, failed, bad,
             printable(ctx.results_path()));
  // Not saved: why, and the lines themselves; a rerun once the file is writable tunes only these.
  const bool lost = report_unsaved(ctx, "tune");
  if (a.in_context && !lost) {
    if (Status st = check_recorded_workload(ctx, *rt, mine); !st.is_ok()) {
      fmt::print(stderr, "tunableop tune: in-context check: {}\n", st.to_string());
      return 1;
    }
  }
  return failed || bad || lost ? 1 : 0;
}

// One child process per GPU, each with its own shard of the lines and its own results file;
// then every GPU's file receives the others' results (same validators only), so no GPU has to
// tune a problem another one already measured on identical hardware.
int tune_all_gpus(const TuneArgs& a, const std::vector<int>& gpus) {
  const char* self = "tunableop";
  std::vector<pid_t> kids;
  for (size_t s = 0; s < gpus.size(); ++s) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string shard = std::to_string(s), shards = std::to_string(gpus.size()), gpu = std::to_string(gpus[s]);
      std::vector<const char*> argv = {self,          "tune",     a.file.c_str(), "--device",
                                       "cuda",        "--gpu",    gpu.c_str(),    "--shard",
                                       shard.c_str(), "--shards", shards.c_str(), "--fanout-child"};
      if (a.retune) argv.push_back("--retune");
      argv.push_back(nullptr);
      execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    kids.push_back(pid);
  }
  int rc = 0;
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  // Merge: each GPU's file gets every other GPU's entries (append skips keys already there).
  std::vector<std::unique_ptr<Context>> ctxs;
  for (int g : gpus) {
    ctxs.push_back(std::make_unique<Context>(Device::cuda(g)));
    (void)ctxs.back()->load_results();
  }
  for (size_t i = 0; i < ctxs.size(); ++i) {
    for (size_t j = 0; j < ctxs.size(); ++j) {
      if (i == j) continue;
      if (ctxs[i]->current_validators() != ctxs[j]->current_validators()) {
        fmt::print("not merging cuda:{} into cuda:{}: different validators\n", gpus[j], gpus[i]);
        continue;
      }
      ResultsFile f(ctxs[i]->results_path(), ctxs[i]->current_validators());
      Status st = f.open().status();
      for (const auto& e : ctxs[j]->results().entries())
        if (st.is_ok()) st = f.append(e);
      if (!st.is_ok()) {
        fmt::print(stderr, "tunableop tune: merging cuda:{} into cuda:{}: {}\n", gpus[j], gpus[i],
                   printable(st.message()));
        rc = 1;
      }
    }
  }
  fmt::print("tuned on {} GPUs; results merged into each GPU's file\n", gpus.size());
  return rc;
}

StatusOr<std::vector<int>> resolve_gpus(const std::string& list) {
  if (list != "all") return parse_gpu_list(list);  // "--gpus: 'abc' is not a GPU ordinal ..."
  std::vector<int> gpus;
  Context probe(Device::cuda(0));
  const DeviceRuntime* rt = probe.registry().runtime(DeviceKind::kCuda);
  int count = rt ? rt->device_count() : 0;
  for (int g = 0; g < count; ++g) gpus.push_back(g);
  return gpus;
}

void add_tune_command(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* c = app.add_subcommand("tune", "Tune every problem of an untuned file (tunableop_untuned%d.csv)");
  c->add_option("FILE", a->file, "untuned problems, one 'op,params' line each")->required()->check(CLI::ExistingFile);
  c->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  CLI::Option* gpu = c->add_option("--gpu", a->gpu, "CUDA device ordinal (MPI ranks: by local rank unless given)");
  gpu->check(at_least(0))->capture_default_str();
  c->add_option("--gpus", a->gpus, "'all' or a comma list: one process per GPU, results merged");
  c->add_flag("--retune", a->retune, "tune problems that already have a result");
  c->add_flag("--in-context", a->in_context,
              "then time the file's problems in sequence, tuned vs Default, and drop choices that lose there");
  c->add_option("--verbose", a->verbose, "override TUNABLEOP_VERBOSE (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--shard", a->shard)->check(at_least(0))->group("");  // internal (multi-GPU children)
  c->add_option("--shards", a->shards)->check(at_least(1))->group("");
  c->add_flag("--fanout-child", a->fanout_child)->group("");   // set by tune_all_gpus: never an MPI rank
  c->add_option("--test-exit-rank", a->exit_rank)->group("");  // test hook (tune.h)
  c->add_option("--test-exit-after", a->exit_after)->group("");
  c->callback([a, gpu]() {
    int rc = 0;
    a->gpu_given = gpu->count() > 0;
    unbind_from_mpi_launcher(*a);
    if (!a->fanout_child && mpi_launch_size() > 1) {
      rc = tune_mpi(*a);  // one rank of `mpirun -np N tunableop tune FILE`
    } else if (!a->gpus.empty()) {
      auto list = resolve_gpus(a->gpus);
      if (!list.is_ok()) {
        fmt::print(stderr, "tunableop tune: {}\n", list.status().message());
        std::exit(2);
      }
      std::vector<int> gpus = *list;
      if (gpus.empty()) {
        fmt::print(stderr, "tunableop tune: --gpus {}: no CUDA device found\n", a->gpus);
        std::exit(2);
      }
      rc = tune_all_gpus(*a, gpus);
    } else {
      Device dev = a->device == "cuda" ? Device::cuda(a->gpu) : Device::cpu();
      if (a->device != "cpu" && a->device != "cuda") {
        fmt::print(stderr, "tunableop tune: --device must be cpu or cuda\n");
        std::exit(2);
      }
      int bad = 0;
      auto lines = read_problems(a->file, bad);
      if (!lines.is_ok()) {
        fmt::print(stderr, "tunableop tune: {}\n", printable(lines.status().message()));
        std::exit(2);
      }
      rc = tune_problems(*a, dev, *lines, bad);
    }
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
