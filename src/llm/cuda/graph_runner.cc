#include "llm/cuda/graph_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "cuda_common/cuda_check.h"
#include "tunableop/fused_linear.h"

namespace tunableop::llm::cuda {

using ::tunableop::cuda::cuda_status;

namespace {

// A step variant's name in the results file: stable and without commas (StepVariant::name() is
// for people and has them).
std::string variant_tag(const StepVariant& v) {
  std::string t = fmt::format("Step_{}{}_pdl{}_pf{}", v.fused ? "fused" : "unfused", v.every_site ? "_every" : "",
                              v.pdl, v.prefetch);
  if (v.rope) t += v.rope_rows ? fmt::format("_rope_r{}k{}", v.rope_rows, v.rope_k_split) : "_rope";
  if (v.qkv_fused) t += "_qkv";
  if (v.fuse_on) t += fmt::format("_on{:x}", v.fuse_on);
  if (v.fuse_off) t += fmt::format("_off{:x}", v.fuse_off);
  if (v.shape_sites) t += fmt::format("_shape{:x}r{}k{}", v.shape_sites, v.shape_rows, v.shape_k_split);
  return t;
}

// The variants of one step key as a tuning problem for the core tuner: candidate 0 ("Default")
// is the default build, the others the step_variants() list; a run is one replay of the
// candidate's graph (captured on first use; a variant that cannot be captured is unsupported).
// A step replays identically (same inputs, same cache positions), so every run is the same
// work. The numerics check passes: the variants compose kernels whose own ops check them, and
// the engine's tests compare their tokens.
class StepVariantProblem final : public TuningProblem {
 public:
  StepVariantProblem(std::string op, std::string params, std::vector<std::string> names,
                     std::function<Status(size_t)> prepare, std::function<Status(size_t)> launch,
                     std::unique_ptr<Timer> timer)
      : op_(std::move(op)),
        params_(std::move(params)),
        names_(std::move(names)),
        prepare_(std::move(prepare)),
        launch_(std::move(launch)),
        timer_(std::move(timer)) {}
  std::string op_signature() const override { return op_; }
  std::string params_signature() const override { return params_; }
  size_t candidate_count() const override { return names_.size(); }
  std::string candidate_name(size_t i) const override { return names_[i]; }
  Status supports(size_t i) override { return prepare_(i); }
  Status check_numerics(size_t) override { return Status::ok(); }
  Status run(size_t i, size_t) override { return launch_(i); }
  size_t rotation_count() const override { return 1; }
  Timer& timer() override { return *timer_; }

 private:
  std::string op_, params_;
  std::vector<std::string> names_;
  std::function<Status(size_t)> prepare_, launch_;
  std::unique_ptr<Timer> timer_;
};

}  // namespace

GraphRunner::GraphRunner(Context& ctx, cudaStream_t stream, StepVariant& variant, bool pdl_capable, std::string model,
                         DType dtype)
    : ctx_(ctx),
      stream_(stream),
      variant_(variant),
      variants_(step_variants(pdl_capable)),
      default_variant_{true, pdl_capable ? 1 : 0, 0},
      model_(std::move(model)),
      op_(std::string("DecodeStepTunableOp_") + dtype_torch_name(dtype)) {}

std::string GraphRunner::step_params(const StepKey& key) const {
  return fmt::format("{}_b{}{}", model_, key.batch, key.slot_table ? "_slots" : "");
}

Status GraphRunner::replay(const Graph& g, LinearOp& linear) {
  TUNABLEOP_RETURN_IF_ERROR(g.exec.launch(stream_));
  linear.add_calls(g.calls, 1);
  linear.add_attention_calls(g.attention_calls, 1);
  return Status::ok();
}

std::string GraphRunner::solution_of(const LinearOp::Problem& p) const {
  auto e = ctx_.results().lookup(p.op, p.params);
  return e ? e->solution : std::string("Default");
}

bool GraphRunner::stale(Graph& g) {
  if (!g.tunableop) return false;  // every problem runs its Default
  const uint64_t now = ctx_.results().version();
  if (g.results == now) return false;
  size_t i = 0;
  for (const auto* list : {&g.calls, &g.attention_calls}) {
    for (const LinearOp::Problem& p : *list) {
      if (i >= g.solutions.size() || solution_of(p) != g.solutions[i]) return true;
      ++i;
    }
  }
  g.results = now;  // nothing it runs changed
  return false;
}

// The GEMMs a replay runs are not called through LinearOp: the calls made while capturing are
// kept and credited to it on each replay.
StatusOr<GraphRunner::Graph> GraphRunner::capture(LinearOp& linear, const std::function<Status()>& step) {
  const auto before = linear.problems();
  const auto attention_before = linear.attention_problems();
  Status st = cuda_status(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  Status fwd = st.is_ok() ? step() : Status::ok();
  Graph g;
  if (st.is_ok()) st = g.exec.end_capture(stream_);
  const auto captured = LinearOp::difference(before, linear.problems());
  const auto attention_captured = LinearOp::difference(attention_before, linear.attention_problems());
  linear.add_calls(captured, -1);  // captured, not run
  linear.add_attention_calls(attention_captured, -1);
  if (st.is_ok() && !fwd.is_ok()) st = fwd;
  if (!st.is_ok()) {
    (void)cudaGetLastError();  // capture errors are not sticky; clear them
    return st;
  }
  g.calls = captured;
  g.attention_calls = attention_captured;
  const bool enabled = ctx_.config().snapshot().enabled;
  g.tunableop = enabled;
  g.results = ctx_.results().version();
  for (const auto* list : {&g.calls, &g.attention_calls}) {
    for (const LinearOp::Problem& p : *list) g.solutions.push_back(enabled ? solution_of(p) : "Default");
  }
  g.variant = variant_;
  return g;
}

Status GraphRunner::decode_step(const StepKey& key, LinearOp& linear, const std::function<Status()>& step,
                                const DecodePolicy& policy) {
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    if (!stale(it->second)) return replay(it->second, linear);
    graphs_.erase(it);
  }
  // The key's first step (or the first after one of its problems changed) runs eagerly: tuning,
  // workspace growth and attribute setup happen here, outside capture.
  const bool choose = policy.graphs && decode_error_.empty() && policy.variants && policy.forced < 0;
  if (policy.forced >= 0) {
    variant_ = variants_[std::min(size_t(policy.forced), variants_.size() - 1)];
  } else if (auto c = chosen_.find(key); c != chosen_.end()) {
    variant_ = c->second;
  } else if (choose) {
    variant_ = default_variant_;  // each site's fused-or-not choice is made in this step
  }
  TUNABLEOP_RETURN_IF_ERROR(step());
  if (!policy.graphs || !decode_error_.empty()) return Status::ok();
  if (choose && !chosen_.count(key)) {
    auto v = choose_variant(key, linear, step);
    if (!v.is_ok()) return v.status();
    chosen_[key] = *v;
    if (graphs_.count(key)) return Status::ok();  // choose_variant kept the winner's graph
    variant_ = *v;
  }
  auto g = capture(linear, step);
  if (!g.is_ok()) {
    decode_error_ = g.status().message();
    ctx_.log().warn("llm: decode runs without a CUDA graph: " + g.status().to_string());
    return Status::ok();
  }
  graphs_[key] = std::move(g.value());
  return Status::ok();
}

StatusOr<StepVariant> GraphRunner::choose_variant(const StepKey& key, LinearOp& linear,
                                                  const std::function<Status()>& step) {
  // Past the fused kernels' token limit every site runs unfused and the qkv kernel prefetches
  // nothing, so the variants differ only in programmatic dependent launch: the default (on) and
  // the unfused build without it.
  std::vector<StepVariant> all = {default_variant_};
  if (key.batch <= kFusedLinearMaxTokens) {
    all.insert(all.end(), variants_.begin(), variants_.end());
  } else {
    all.push_back(StepVariant{false, 0, 0});
  }
  std::vector<std::string> names = {"Default"};
  for (size_t i = 1; i < all.size(); ++i) names.push_back(variant_tag(all[i]));
  std::vector<std::optional<Graph>> graphs(all.size());
  auto prepare = [&](size_t i) -> Status {
    if (graphs[i]) return Status::ok();
    variant_ = all[i];
    auto g = capture(linear, step);
    if (!g.is_ok()) return Status::unsupported(all[i].name() + ": " + g.status().message());
    TUNABLEOP_RETURN_IF_ERROR(g->exec.launch(stream_));  // the first launch uploads the graph
    graphs[i] = std::move(g.value());
    return Status::ok();
  };
  auto launch = [&](size_t i) { return graphs[i]->exec.launch(stream_); };
  auto valid = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  const std::string params = step_params(key);
  bool tuned = false;
  auto make = [&]() -> StatusOr<std::unique_ptr<TuningProblem>> {
    const DeviceRuntime* rt = ctx_.runtime();
    if (!rt || !rt->make_timer) return Status::unsupported("no device timer for " + ctx_.device().to_string());
    tuned = true;
    return std::unique_ptr<TuningProblem>(
        std::make_unique<StepVariantProblem>(op_, params, names, prepare, launch, rt->make_timer(stream_)));
  };
  auto chosen = ctx_.choose(op_, params, valid, make);
  if (!chosen.is_ok()) return chosen.status();
  const size_t i = size_t(std::find(names.begin(), names.end(), *chosen) - names.begin());
  const StepVariant v = i < all.size() ? all[i] : default_variant_;
  report_.push_back(fmt::format("decode step b{}{}: {} ({})", key.batch, key.slot_table ? " (slot table)" : "",
                                v.name(), tuned ? fmt::format("tuned over {} variants", all.size()) : "results file"));
  if (i < graphs.size() && graphs[i]) graphs_[key] = std::move(*graphs[i]);
  variant_ = v;
  return v;
}

Status GraphRunner::decode_step_ahead(const StepKey& key, int slot, LinearOp& linear,
                                      const std::function<Status()>& step, const std::function<Status()>& advance,
                                      const DecodePolicy& policy) {
  const auto ahead_key = std::make_tuple(key.batch, key.enabled, key.slot_table, slot);
  if (auto it = ahead_.find(ahead_key); it != ahead_.end()) {
    if (!stale(it->second)) return replay(it->second, linear);
    ahead_.erase(it);
  }
  // As the key's own step (eager, choosing and capturing its graph), then `advance` alone; the
  // graph of both is captured then, with the key's variant, for the next steps.
  TUNABLEOP_RETURN_IF_ERROR(decode_step(key, linear, step, policy));
  TUNABLEOP_RETURN_IF_ERROR(advance());
  auto plain = graphs_.find(key);
  if (!policy.graphs || !decode_error_.empty() || plain == graphs_.end()) return Status::ok();
  const StepVariant now = variant_;
  variant_ = plain->second.variant;
  auto g = capture(linear, [&]() -> Status {
    TUNABLEOP_RETURN_IF_ERROR(step());
    return advance();
  });
  variant_ = now;
  if (!g.is_ok()) {  // the step alone captured: keep its graph, run this loop eagerly
    ctx_.log().warn("llm: the decode loop's step runs without a CUDA graph: " + g.status().to_string());
    return Status::ok();
  }
  ahead_[ahead_key] = std::move(g.value());
  return Status::ok();
}

Status GraphRunner::prefill(const PrefillShape& shape, LinearOp& linear, const std::function<Status()>& pass,
                            bool graphs) {
  if (!graphs || !prefill_error_.empty()) return pass();
  auto version = [&] { return shape.tunableop ? ctx_.results().version() : uint64_t(0); };
  switch (prefill_graphs_.next(shape, version())) {
    case PrefillGraphs<Graph>::Action::kEager:
      TUNABLEOP_RETURN_IF_ERROR(pass());
      prefill_graphs_.ran_eagerly(shape, version());
      return Status::ok();
    case PrefillGraphs<Graph>::Action::kCapture: {
      auto g = capture(linear, pass);
      if (!g.is_ok()) {  // nothing ran: run it eagerly, and prefill stays eager from now on
        prefill_error_ = g.status().message();
        ctx_.log().warn("llm: prefill runs without a CUDA graph: " + g.status().to_string());
        prefill_graphs_.clear();
        return pass();
      }
      prefill_graphs_.captured(shape, std::move(g.value()));
      break;
    }
    case PrefillGraphs<Graph>::Action::kReplay: break;
  }
  return replay(prefill_graphs_.graph(shape), linear);
}

std::string GraphRunner::report() const {
  std::string s;
  for (const std::string& line : report_) s += line + "\n";
  return s;
}

}  // namespace tunableop::llm::cuda
