#include "bench_measure.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace tunableop::cli {

double bytes_moved(const GemmParams& p) {
  double es = double(dtype_size(p.dtype));
  double c = double(p.m) * double(p.n) * (p.beta != 0 ? 2 : 1);
  return es * double(p.batch) * (double(p.m) * double(p.k) + double(p.k) * double(p.n) + c);
}

StatusOr<std::vector<CandidateTiming>> measure_candidates(Context& ctx, const GemmParams& p, int rounds,
                                                          double ms_per_sample, void* stream) {
  return measure_op_candidates<GemmOp>(ctx, p, rounds, ms_per_sample, stream);
}

StatusOr<ChoiceVerdict> guard_suite_choice(Context& ctx, const GemmParams& p, const std::string& chosen,
                                           const std::vector<CandidateTiming>& timings) {
  if (chosen == "Default") return ChoiceVerdict{};
  const CandidateTiming *tuned = nullptr, *def = nullptr;
  for (const auto& t : timings) {
    if (t.name == chosen) tuned = &t;
    if (t.name == "Default") def = &t;
  }
  if (!tuned || !def) return ChoiceVerdict{};
  const ChoiceVerdict v = judge_choice(tuned->rounds, def->rounds);
  if (!v.loses) return v;
  auto entry = ctx.results().lookup(gemm_op_signature(p), gemm_params_signature(p));
  if (!entry || entry->solution != chosen) return Status::internal("the suite's tuned choice is not in the results");
  entry->default_ms = def->median_ms;  // Default's time in this measurement goes in the time column
  TUNABLEOP_RETURN_IF_ERROR(revert_to_default(
      ctx, *entry,
      fmt::format("bench --suite guard: {} lost to Default in the suite's measurement (tuned / Default {:.3f} over {} "
                  "rounds); Default kept",
                  chosen, v.ratio, v.rounds)));
  return v;
}

std::string tune_into_results(Context& ctx, const std::string& results) {
  std::string file = results;
  if (file.empty())
    file = (std::filesystem::temp_directory_path() / fmt::format("tunableop_bench_{}_%d.csv", ::getpid())).string();
  (void)ctx.config().set(Setting::kFilename, file);
  (void)ctx.config().set(Setting::kEnabled, true);
  (void)ctx.config().set(Setting::kTuning, true);
  (void)ctx.load_results();
  return results.empty() ? results_path_for(file, std::to_string(ctx.device().ordinal)) : "";
}

void remove_temp_results(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::filesystem::remove(path + ".stats", ec);
}

StatusOr<double> time_dispatch(Context& ctx, const GemmParams& p, const GemmOperands& ops, int rounds,
                               double ms_per_sample) {
  const DeviceRuntime* rt = ctx.registry().runtime(ctx.device().kind);
  auto timer = rt->make_timer(ops.stream);
  TUNABLEOP_RETURN_IF_ERROR(gemm(ctx, p, ops));  // warm-up (and tuning, if it is a miss)
  timer->start();
  TUNABLEOP_RETURN_IF_ERROR(gemm(ctx, p, ops));
  double one = timer->stop_ms();
  int runs = std::clamp(int(ms_per_sample / std::max(one, 1e-4)), 1, 100000);
  std::vector<double> s;
  for (int r = 0; r < rounds; ++r) {
    timer->start();
    for (int k = 0; k < runs; ++k) TUNABLEOP_RETURN_IF_ERROR(gemm(ctx, p, ops));
    s.push_back(timer->stop_ms() / runs);
  }
  return median(s);
}

StatusOr<double> measure_copy_gbs(Context& ctx, void* stream) {
  const DeviceRuntime* rt = ctx.registry().runtime(ctx.device().kind);
  // A buffer well beyond the last-level cache, median of several copies.
  size_t bytes = std::max<size_t>(size_t(256) << 20, rt->last_level_cache_bytes() * 2);
  bytes = std::min<size_t>(bytes, size_t(1) << 30);
  auto src = rt->alloc(bytes), dst = rt->alloc(bytes);
  if (!src.is_ok() || !dst.is_ok()) return Status::internal("cannot allocate buffers for the copy ceiling");
  std::vector<double> s;
  auto timer = rt->make_timer(stream);
  for (int r = 0; r < 7; ++r) {
    timer->start();
    Status st = rt->copy(*dst, *src, bytes, DeviceRuntime::Copy::kDeviceToDevice, stream);
    double ms = timer->stop_ms();
    if (!st.is_ok()) return st;
    if (r > 0) s.push_back(ms);
  }
  rt->free(*src);
  rt->free(*dst);
  return 2.0 * double(bytes) / (median(s) * 1e-3) / 1e9;
}

StatusOr<Ceilings> measure_ceilings(Context& ctx, DType dtype, void* stream) {
  Ceilings c;
  const bool cpu = ctx.device().kind == DeviceKind::kCpu;
  auto copy = measure_copy_gbs(ctx, stream);
  if (!copy.is_ok()) return copy.status();
  c.copy_gbs = *copy;
  // Compute: the best candidate on a large square GEMM.
  int64_t n = cpu ? 1536 : 8192;
  GemmParams p;
  p.dtype = dtype;
  p.m = p.n = p.k = n;
  c.gemm_shape = fmt::format("{}^3 {}", n, dtype_name(dtype));
  auto t = measure_candidates(ctx, p, 3, cpu ? 50 : 20, stream);
  if (!t.is_ok()) return t.status();
  double best = 0;
  for (const auto& ct : *t)
    if (ct.median_ms > 0 && (best == 0 || ct.median_ms < best)) best = ct.median_ms, c.gemm_solution = ct.name;
  if (best > 0) c.gemm_gflops = p.flops() / (best * 1e-3) / 1e9;
  return c;
}

}  // namespace tunableop::cli
