// Host cost of served dispatch: a GEMM whose tuned candidate does nothing, called through a
// plan, through the plain gemm() call, linear(), and the engine's LinearOp. Targets (issue 8): <= 100 ns per run via a
// plan,
// <= 300 ns via gemm(). Run on a quiet machine:
//   build/bench/bench_dispatch --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "backends/cpu_runtime.h"
#include "llm/linear_op.h"
#include "tunableop/gemm.h"

namespace tunableop {
namespace {

GemmCandidate noop(const std::string& name) {
  GemmCandidate c;
  c.name = name;
  c.supports = [](const GemmParams&) { return Status::ok(); };
  c.run = [](const GemmParams&, const GemmOperands&) { return Status::ok(); };
  c.info = {"bench", "no-op", {}};
  return c;
}

// A context serving "Gemm_Noop" for the Llama-2-7B decode q-projection shape, tuning off: every
// call is a hit. The results file names a path that does not exist (nothing is written).
struct Served {
  Served() {
    Config c = Config::defaults_only();
    (void)c.set(Setting::kEnabled, true);
    (void)c.set(Setting::kTuning, false);
    std::string file = (std::filesystem::temp_directory_path() /
                        ("tunableop-bench-dispatch-" + std::to_string(::getpid()) + "-absent-%d.csv"))
                           .string();
    (void)c.set(Setting::kFilename, file);
    ctx = std::make_unique<Context>(Device::cpu(), std::move(c), [](Registry& r) {
      register_cpu_runtime(r);
      r.list<GemmCandidate>().push_back(noop("Default"));
      r.list<GemmCandidate>().push_back(noop("Gemm_Noop"));
    });
    p = linear_params(DType::kBF16, /*tokens=*/1, /*in=*/4096, /*out=*/4096);
    ResultEntry e;
    e.op = gemm_op_signature(p);
    e.params = gemm_params_signature(p);
    e.solution = "Gemm_Noop";
    e.time_ms = 0.01;
    ctx->results().insert(e);
  }
  std::unique_ptr<Context> ctx;
  GemmParams p;
  char a = 0, b = 0, c = 0;  // never read: the candidate does nothing
  GemmOperands ops{&a, &b, &c};
};

Served& served() {
  static Served s;
  return s;
}

void BM_PlanRun(benchmark::State& state) {
  Served& s = served();
  auto plan = s.ctx->plan(s.p);
  if (!plan.is_ok() || !plan->run(s.ops).is_ok() || plan->solution() != "Gemm_Noop") {
    state.SkipWithError("plan does not serve Gemm_Noop");
    return;
  }
  for (auto _ : state) {
    Status st = plan->run(s.ops);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_PlanRun);
BENCHMARK(BM_PlanRun)->Threads(2);

void BM_GemmCall(benchmark::State& state) {
  Served& s = served();
  if (!gemm(*s.ctx, s.p, s.ops).is_ok()) {
    state.SkipWithError("gemm() failed");
    return;
  }
  for (auto _ : state) {
    Status st = gemm(*s.ctx, s.p, s.ops);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_GemmCall);
BENCHMARK(BM_GemmCall)->Threads(2);

void BM_LinearCall(benchmark::State& state) {
  Served& s = served();
  for (auto _ : state) {
    Status st = linear(*s.ctx, DType::kBF16, 1, 4096, 4096, &s.a, &s.b, &s.c);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_LinearCall);

// The engine's path: its LinearOp (counting the call per problem) over tunableop_linear, which
// holds one plan per shape.
void BM_EngineLinear(benchmark::State& state) {
  Served& s = served();
  llm::LinearOp op(llm::tunableop_linear(*s.ctx));
  for (auto _ : state) {
    Status st = op(llm::Phase::kDecode, DType::kBF16, 1, 4096, 4096, &s.a, &s.b, &s.c);
    benchmark::DoNotOptimize(st);
  }
  if (op.problems().size() != 1) state.SkipWithError("the engine counted more than one problem");
}
BENCHMARK(BM_EngineLinear);

}  // namespace
}  // namespace tunableop

BENCHMARK_MAIN();
