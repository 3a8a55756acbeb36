#include "bench_fp8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench_measure.h"
#include "bench_suites.h"
#include "cli_support.h"
#include "tunableop/safe_file.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::cli {

namespace {

int fail(const Status& st) {
  fmt::print(stderr, "tunableop bench: {}\n", printable(st.to_string()));
  return 2;
}

// Bytes a call must move at least: the fp8 weight and activations once, the bf16 output once,
// the scales.
double fp8_bytes(const ScaledGemmParams& p) {
  return double(p.m) * double(p.k) + double(p.k) * double(p.n) + 2.0 * double(p.m) * double(p.n) +
         4.0 * double(p.scale_a_count() + p.scale_b_count());
}

struct Row {
  std::string name;
  ScaledGemmParams p;
  std::string chosen;
  double def = 0, tuned = 0, tuning_ms = 0, floor = 0;
  bool torch_refuses = false;  // torch._scaled_mm wants every dimension a multiple of 16
};

}  // namespace

int bench_fp8_suite(Context& ctx, const Fp8SuiteArgs& a, void* stream) {
  std::vector<Row> rows;
  for (const SuiteShape& s : suite_shapes("llm")) {
    if (!a.only.empty() && s.name.find(a.only) == std::string::npos) continue;
    Row r;
    r.name = s.name;
    r.p = scaled_linear_params(DType::kF8E4M3, DType::kBF16, ScaleMode::kRowwise, s.p.n, s.p.k, s.p.m);
    r.torch_refuses = r.p.m % 16 != 0 || r.p.k % 16 != 0;
    rows.push_back(r);
  }
  if (rows.empty()) return fail(Status::invalid_argument("--only " + printable(a.only) + ": no shape matches"));
  const std::string temp = tune_into_results(ctx, a.results);
  auto copy_gbs = measure_copy_gbs(ctx, stream);
  if (!copy_gbs.is_ok()) return fail(copy_gbs.status());
  std::string machine = ctx.device().to_string();
  for (const auto& [k, v] : ctx.current_validators()) machine += (k == "TUNABLEOP_VERSION" ? "" : "; " + k + "=" + v);
  fmt::print("# machine: {}\n# copy ceiling {:.1f} GB/s (read + write)\n", machine, *copy_gbs);
  for (Row& r : rows) {
    auto rep = OpTools<ScaledGemmOp>::tune(ctx, r.p, /*retune=*/true, stream);
    if (!rep.is_ok()) return fail(rep.status());
    r.chosen = rep->winner.solution;
    r.tuning_ms = rep->winner.tuning_ms;
    // Default and the choice, measured alike (interleaved rounds over rotating copies).
    const std::vector<std::string> only{r.chosen};
    auto t = measure_op_candidates<ScaledGemmOp>(ctx, r.p, a.rounds, 5, stream, &only);
    if (!t.is_ok()) return fail(t.status());
    for (const auto& ct : *t) {
      if (ct.name == "Default") r.def = ct.median_ms;
      if (ct.name == r.chosen) r.tuned = ct.median_ms;
    }
    r.floor = fp8_bytes(r.p) / (*copy_gbs * 1e9) * 1e3;
    fmt::print(stderr, "{:<26} default {:9.4f} ms  tuned {:9.4f} ms  {:<40} tuning {:6.0f} ms\n", r.name, r.def,
               r.tuned, r.chosen, r.tuning_ms);
  }

  fmt::print("| shape | m x n x k | Default ms | tuned ms | speedup | chosen | TFLOP/s | % bytes floor | tuning s |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  double log_sum = 0, worst = 1e30, max_tuning = 0;
  int counted = 0;
  std::string worst_name;
  for (const Row& r : rows) {
    const double speedup = r.tuned > 0 ? r.def / r.tuned : 0;
    fmt::print("| {}{} | {}x{}x{} | {:.4f} | {:.4f} | {:.2f}x | {} | {:.1f} | {:.0f}% | {:.2f} |\n", r.name,
               r.torch_refuses ? " (*)" : "", r.p.m, r.p.n, r.p.k, r.def, r.tuned, speedup, r.chosen,
               r.tuned > 0 ? r.p.flops() / (r.tuned * 1e-3) / 1e12 : 0, r.tuned > 0 ? 100 * r.floor / r.tuned : 0,
               r.tuning_ms / 1e3);
    max_tuning = std::max(max_tuning, r.tuning_ms);
    if (r.torch_refuses || speedup <= 0) continue;
    log_sum += std::log(speedup);
    ++counted;
    if (speedup < worst) worst = speedup, worst_name = r.name;
  }
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.torch_refuses; }))
    fmt::print(
        "\n(*) torch._scaled_mm refuses a dimension that is not a multiple of 16, so no PyTorch program runs this "
        "shape (Default is our simt kernel where cuBLASLt offers no FP8 algorithm): left out of the geomean\n");
  if (counted)
    fmt::print(
        "geomean speedup tuned vs Default (cuBLASLt's first heuristic): {:.3f}x over {} shapes; lowest {:.3f}x "
        "({}); longest tuning {:.2f} s\n",
        std::exp(log_sum / counted), counted, worst, worst_name, max_tuning / 1e3);
  int rc = 0;
  if (!a.csv.empty()) {
    std::string out = "shape,m,n,k,default_ms,tuned_ms,chosen,floor_ms,tuning_ms,torch_refuses\n";
    for (const Row& r : rows)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", r.name, r.p.m, r.p.n, r.p.k, r.def, r.tuned, r.chosen,
                         r.floor, r.tuning_ms, r.torch_refuses ? 1 : 0);
    if (Status st = replace_regular_file(a.csv, out); !st.is_ok()) {
      fmt::print(stderr, "tunableop bench: --csv {}\n", printable(st.message()));
      rc = 1;
    }
  }
  if (!temp.empty()) {
    remove_temp_results(temp);
  } else if (report_unsaved(ctx, "bench")) {
    rc = 1;
  }
  return rc;
}

}  // namespace tunableop::cli
