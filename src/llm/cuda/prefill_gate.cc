#include "llm/cuda/prefill_gate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "cuda_common/cuda_check.h"
#include "tunableop/half.h"

namespace tunableop::llm::cuda {

PrefillGate::PrefillGate(Context& ctx) : ctx_(ctx) {}

void PrefillGate::init(cudaStream_t stream, Activation activation) {
  stream_ = stream;
  activation_ = activation;
}

Status PrefillGate::project(const Projection& p, LinearOp& linear, const std::string& site, const Hooks& h) {
  auto chosen = choice(p, linear, site, h);
  if (!chosen.is_ok()) return chosen.status();
  if (chosen->empty()) return h.unfused(p, linear);
  return run_cudnn(p, linear, *chosen, h);
}
Act PrefillGate::act() const {
  const Activation a = activation_;
  return a == Activation::kSilu ? Act::kSilu : a == Activation::kGeluTanh ? Act::kGeluTanh : Act::kGeluErf;
}
std::string PrefillGate::params(const Projection& p) const {
  const Activation a = activation_;
  const char* act = a == Activation::kSilu ? "silu" : a == Activation::kGeluTanh ? "gelu_tanh" : "gelu_erf";
  return fmt::format("{}_n{}_m{}_k{}", act, p.out / 2, p.rows, p.in);
}
// The up-half GEMM alone (timing).
Status PrefillGate::up_gemm(const Projection& p, LinearOp& linear, const Hooks& h) {
  const int64_t n = p.out / 2;
  const void* w_up = static_cast<const char*>(p.w) + size_t(n * p.in) * size_t(2);
  // up [rows, n] in the first half of y (the gate_up scratch): the GEMM op, tuned as its own problem.
  TUNABLEOP_RETURN_IF_ERROR(linear(p.phase, DType::kBF16, p.rows, p.in, n, p.input, w_up, p.y, stream_));
  h.mark(p.name, "up_gemm", p.weight_bytes(size_t(2)) / 2, true, p.flops() / 2);
  return Status::ok();
}
Status PrefillGate::run_cudnn(const Projection& p, LinearOp& linear, const std::string& tag, const Hooks& h) {
  TUNABLEOP_RETURN_IF_ERROR(up_gemm(p, linear, h));
  const int64_t n = p.out / 2;
  TUNABLEOP_RETURN_IF_ERROR(cudnn_gate_.run(stream_, act(), p.rows, p.in, n, p.input, p.w, p.y, p.gated, tag));
  LinearOp::Problem gate{kGateOp,
                         params(p),
                         p.phase == Phase::kPrefill,
                         p.phase == Phase::kDecode,
                         1,
                         p.phase == Phase::kPrefill ? 1 : 0,
                         p.flops() / 2};
  linear.add_calls({gate}, 1);  // the gate GEMM's flops in the GEMM tally
  h.mark(p.name, "gate_cudnn", p.weight_bytes(size_t(2)) / 2, true, p.flops() / 2);
  return Status::ok();
}
// Up to 32 rows of p.gated, spread over the rows, as floats (the numerics check).
StatusOr<std::vector<float>> PrefillGate::gated_sample(const Projection& p) {
  const int64_t n = p.out / 2, take = std::min<int64_t>(p.rows, 32), step = p.rows / take;
  std::vector<bf16> h(size_t(take * n));
  TUNABLEOP_CUDA_TRY(cudaMemcpy2DAsync(h.data(), size_t(n) * 2, p.gated, size_t(step * n) * 2, size_t(n) * 2,
                                       size_t(take), cudaMemcpyDeviceToHost, stream_));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(stream_));
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = to_float(h[i]);
  return f;
}
// The cuDNN configuration tag for site p ("": gemm+gated); see gate_up_prefill.
StatusOr<std::string> PrefillGate::choice(const Projection& p, LinearOp& linear, const std::string& site,
                                          const Hooks& h) {
  const char* env = std::getenv("TUNABLEOP_LLM_PREFILL_GATE_CUDNN");
  const std::string force = env && *env ? env : "auto";
  if (force == "off") return std::string();
  if (force != "on" && !ctx_.options().enabled) return std::string();  // TunableOp off: Default
  if (auto it = choices_.find(site); it != choices_.end()) return it->second.tag;
  const Options opt = ctx_.config().snapshot();
  GateChoice& chosen = choices_[site];
  const Act act = this->act();
  const int64_t n = p.out / 2;
  const std::string params = this->params(p);
  const std::string prefix = fmt::format("Cudnn{}_", CudnnGate::version());
  // The results file's choice, when it is this cuDNN's and its configuration still builds.
  if (opt.enabled) {
    if (auto e = ctx_.results().lookup(kGateOp, params)) {
      if (e->solution == "Default" && force != "on") {
        chosen.how = "results file";
        return std::string();
      }
      if (e->solution.rfind(prefix, 0) == 0) {
        const std::string tag = e->solution.substr(prefix.size());
        if (cudnn_gate_.configs(act, p.rows, p.in, n, tag).is_ok()) {
          chosen.tag = tag;
          chosen.how = "results file";
          return tag;
        }
      }
    }
  }
  // A miss with tuning off: Default, as the GEMM op does, without building cuDNN's plans (each
  // configuration's build costs milliseconds, every one of them a second or more: a server meets
  // a new prefill size at every few requests and must not stall on it).
  if (!opt.tuning && force != "on") {
    chosen.how = "not in the results, tuning off";
    return std::string();
  }
  auto tags = cudnn_gate_.configs(act, p.rows, p.in, n, "", force == "on" ? 1 : 0);
  if (!tags.is_ok()) {
    ctx_.log().warn("llm: " + site + ": cuDNN's fused gate GEMM not used: " + tags.status().to_string());
    chosen.how = "cuDNN: " + tags.status().message();
    return std::string();
  }
  if (force == "on") {
    chosen.tag = tags->front();
    chosen.how = "forced";
    return chosen.tag;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TUNABLEOP_CUDA_TRY(cudaStreamIsCapturing(stream_, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) {  // no timing inside a graph; not kept
    choices_.erase(site);
    return std::string();
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto before = linear.problems();
  *h.timing = true;
  // Warm-up and numerics: gemm+gated's output on sampled rows, then each configuration's.
  Status st = h.unfused(p, linear);  // the GEMMs may tune here
  std::vector<float> want;
  if (st.is_ok()) {
    auto s = gated_sample(p);
    st = s.status();
    if (s.is_ok()) want = std::move(*s);
  }
  std::vector<std::string> ok_tags;
  for (size_t i = 0; st.is_ok() && i < tags->size(); ++i) {
    Status r = run_cudnn(p, linear, (*tags)[i], h);
    double err = 1;
    if (r.is_ok()) {
      auto got = gated_sample(p);
      if (!got.is_ok()) {
        st = got.status();
        break;
      }
      double num = 0, den = 0;
      for (size_t j = 0; j < want.size(); ++j) {
        const double d = double((*got)[j]) - want[j];
        num += std::isfinite(d) ? d * d : 1e30;
        den += double(want[j]) * want[j];
      }
      err = std::sqrt(num / std::max(den, 1e-30));
    }
    if (r.is_ok() && err < 2e-2) {
      ok_tags.push_back((*tags)[i]);
    } else {
      ++chosen.rejected;
      ctx_.log().warn(fmt::format("llm: {}: cuDNN gate configuration {} dropped: {}", site, (*tags)[i],
                                  r.is_ok() ? fmt::format("relative error {:.2e}", err) : r.to_string()));
    }
  }
  std::vector<std::function<Status()>> runs = {[this, &p, &linear, &h] { return h.unfused(p, linear); },
                                               [this, &p, &linear, &h] { return up_gemm(p, linear, h); }};
  for (const std::string& tag : ok_tags)
    runs.push_back([this, &p, &linear, tag, &h] { return run_cudnn(p, linear, tag, h); });
  std::vector<double> us;
  if (st.is_ok() && !ok_tags.empty()) {
    auto flush = h.flush();
    st = flush.status();
    if (st.is_ok()) st = DecodeFusion::time_candidates(runs, 7, flush->first, flush->second, h.sink, stream_, &us);
  }
  if (st.is_ok()) st = h.unfused(p, linear);  // p.gated as the model needs it
  *h.timing = false;
  linear.add_calls(LinearOp::difference(before, linear.problems()), -1);  // timing, not the model's
  TUNABLEOP_RETURN_IF_ERROR(st);
  chosen.how = "timed";
  if (us.size() != runs.size()) {  // no configuration computed it right
    cudnn_gate_.keep_only(act, p.rows, p.in, n, "");
    return std::string();
  }
  chosen.us_default = us[0];
  chosen.us_up = us[1];
  size_t best = 0;
  for (size_t i = 0; i < ok_tags.size(); ++i) {
    chosen.timed.emplace_back(ok_tags[i], us[i + 2]);
    if (us[i + 2] < us[best + 2]) best = i;
  }
  chosen.us_best = us[best + 2];
  if (chosen.us_best < chosen.us_default) chosen.tag = ok_tags[best];
  cudnn_gate_.keep_only(act, p.rows, p.in, n, chosen.tag);  // the losers' plans are not kept
  ResultEntry e;
  e.op = kGateOp;
  e.params = params;
  e.solution = chosen.tag.empty() ? "Default" : prefix + chosen.tag;
  // The gate alone (the path minus the up GEMM), so that "tuned alone" reads as the gate's rate.
  e.time_ms = chosen.tag.empty() ? 0 : std::max(chosen.us_best - chosen.us_up, 0.0) / 1e3;
  e.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  e.note = fmt::format("gemm+gated {:.1f} us, up GEMM + cuDNN gate {:.1f} us", chosen.us_default, chosen.us_best);
  if (Status saved = ctx_.store_result(e, true); !saved.is_ok())
    ctx_.log().warn("llm: " + site + ": the gate choice not saved: " + saved.to_string());
  return chosen.tag;
}

std::string PrefillGate::report() const {
  std::string s;
  for (const auto& [site, ch] : choices_) {
    s += fmt::format("prefill gate {}: {} ({}", site, ch.tag.empty() ? "gemm+gated" : "cudnn_gate " + ch.tag, ch.how);
    if (ch.us_default > 0) {
      s += fmt::format("; gemm+gated {:.1f} us, up GEMM {:.1f} us, up GEMM + cuDNN gate:", ch.us_default, ch.us_up);
      for (const auto& [tag, us] : ch.timed) s += fmt::format(" {} {:.1f}", tag, us);
      if (ch.rejected) s += fmt::format("; {} configurations dropped (numerics or errors)", ch.rejected);
    }
    s += ")\n";
  }
  return s;
}

}  // namespace tunableop::llm::cuda
