#include "llm/cuda/prefill_mlp.h"

#include <fmt/format.h>

#include <algorithm>

#include "llm/cuda/decode_fusion.h"

namespace tunableop::llm::cuda {

std::string MlpVariant::name() const {
  return (chunks == 1 ? std::string("rows") : fmt::format("rows/{}", chunks)) + (reverse ? " last-first" : " in order");
}

std::vector<MlpVariant> mlp_variants(int64_t rows) {
  std::vector<MlpVariant> v;
  for (int chunks : {1, 2, 4}) {
    if (chunks > 1 && (rows % (64 * chunks) != 0 || rows / chunks < 256)) continue;
    for (bool reverse : {false, true}) v.push_back({chunks, reverse});
  }
  return v;
}

Status run_mlp_variant(const MlpVariant& v, int64_t rows, const MlpGemm& gemm, const MlpAct& act) {
  if (v.chunks < 1 || rows % v.chunks != 0)
    return Status::invalid_argument(fmt::format("prefill MLP: {} rows do not split into {} chunks", rows, v.chunks));
  const int64_t n = rows / v.chunks;
  for (int64_t r0 = 0; r0 < rows; r0 += n) {
    TUNABLEOP_RETURN_IF_ERROR(gemm(r0, n));
    TUNABLEOP_RETURN_IF_ERROR(act(r0, n, v.reverse));
  }
  return Status::ok();
}

StatusOr<MlpVariant> PrefillMlpChoices::choose(const std::string& site, int64_t rows, const MlpGemm& gemm,
                                               const MlpAct& act, LinearOp& linear, const MlpTiming& timing,
                                               Logger& log) {
  if (const MlpChoice* c = find(site)) return c->best;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(timing.stream, &capturing) != cudaSuccess)
    return Status::device_error("prefill MLP: cudaStreamIsCapturing failed");
  if (capturing != cudaStreamCaptureStatusNone) return MlpVariant{};  // no timing inside a graph; not kept
  const std::vector<MlpVariant> variants = mlp_variants(rows);
  std::vector<std::function<Status()>> runs;
  for (const MlpVariant& v : variants) runs.push_back([&, v] { return run_mlp_variant(v, rows, gemm, act); });
  const auto before = linear.problems();
  *timing.quiet = true;
  Status st;
  for (auto& run : runs) {  // warm-up: the chunks' GEMMs tune here
    st = run();
    if (!st.is_ok()) break;
  }
  std::vector<double> us;
  if (st.is_ok())
    st = DecodeFusion::time_candidates(runs, 5, timing.flush, timing.flush_bytes, timing.sink, timing.stream, &us);
  *timing.quiet = false;
  linear.add_calls(LinearOp::difference(before, linear.problems()), -1);  // timing, not the model's
  MlpChoice c;
  for (size_t i = 0; st.is_ok() && i < variants.size() && i < us.size(); ++i) c.timed.emplace_back(variants[i], us[i]);
  std::stable_sort(c.timed.begin(), c.timed.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (!c.timed.empty()) c.best = c.timed.front().first;
  if (!st.is_ok()) log.warn("llm: " + site + ": prefill MLP variants not timed, the plain one runs: " + st.to_string());
  return set(site, std::move(c)).best;
}

const MlpChoice* PrefillMlpChoices::find(const std::string& site) const {
  auto it = sites_.find(site);
  return it == sites_.end() ? nullptr : &it->second;
}

const MlpChoice& PrefillMlpChoices::set(const std::string& site, MlpChoice choice) {
  return sites_[site] = std::move(choice);
}

std::string PrefillMlpChoices::report() const {
  std::string out;
  for (const auto& [site, c] : sites_) {
    out += fmt::format("prefill mlp {}: {}", site, c.best.name());
    if (!c.timed.empty()) {
      out += " (";
      for (size_t i = 0; i < c.timed.size(); ++i)
        out += fmt::format("{}{} {:.1f} us", i ? ", " : "", c.timed[i].first.name(), c.timed[i].second);
      out += ")";
    }
    out += "\n";
  }
  return out;
}

}  // namespace tunableop::llm::cuda
