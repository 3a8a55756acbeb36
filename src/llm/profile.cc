#include "llm/profile.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tunableop::llm {

StepProfile summarize_profile(const std::vector<std::vector<ProfileSpan>>& steps) {
  StepProfile p;
  p.steps = int(steps.size());
  if (steps.empty()) return p;
  const double per = 1.0 / double(steps.size());
  for (const auto& step : steps) {
    for (const ProfileSpan& s : step) {
      StepProfile::Row* row = nullptr;
      for (auto& r : p.rows) {
        if (r.label == s.label) row = &r;
      }
      if (!row) {
        p.rows.push_back({s.label, s.matmul, 0, 0, 0, 0});
        row = &p.rows.back();
      }
      row->calls += per;
      row->ms += s.ms * per;
      row->bytes += s.bytes;  // divided below
      row->flops += s.flops * per;
      (s.matmul ? p.matmul_ms : p.other_ms) += s.ms * per;
    }
  }
  for (auto& r : p.rows) r.bytes /= int64_t(steps.size());
  return p;
}

std::string format_profile(const StepProfile& p, double step_ms) {
  const double total = p.total_ms();
  std::string s = fmt::format("Decode step breakdown (eager, one event per kernel, mean of {} steps{}):\n", p.steps,
                              p.position > 0 ? fmt::format(" at position {}", p.position) : "");
  s += fmt::format("  {:<44} {:>6} {:>10} {:>6} {:>9}\n", "kernel", "calls", "us/step", "share", "GB/s");
  for (const auto& r : p.rows) {
    const std::string gbps =
        r.bytes > 0 && r.ms > 0 ? fmt::format("{:.0f}", double(r.bytes) / (r.ms * 1e-3) / 1e9) : "";
    s += fmt::format("  {:<44} {:>6.0f} {:>10.1f} {:>5.1f}% {:>9}\n", r.label + (r.matmul ? " *" : ""), r.calls,
                     r.ms * 1e3, total > 0 ? 100 * r.ms / total : 0.0, gbps);
  }
  s += fmt::format("  matmul kernels (*): {:.1f} us ({:.1f}%), other kernels: {:.1f} us ({:.1f}%), sum {:.1f} us\n",
                   p.matmul_ms * 1e3, total > 0 ? 100 * p.matmul_ms / total : 0.0, p.other_ms * 1e3,
                   total > 0 ? 100 * p.other_ms / total : 0.0, total * 1e3);
  if (step_ms > 0) {
    s += fmt::format(
        "  step as benchmarked (TPOT; a graph replay on CUDA): {:.1f} us; minus the sum: {:+.1f} us "
        "(launch gaps, less any overlap)\n",
        step_ms * 1e3, (step_ms - total) * 1e3);
  }
  return s;
}

std::string profile_json(const StepProfile& p, double step_ms) {
  nlohmann::json j;
  j["steps"] = p.steps;
  j["position"] = p.position;
  j["matmul_us"] = p.matmul_ms * 1e3;
  j["other_us"] = p.other_ms * 1e3;
  j["step_us"] = step_ms * 1e3;
  j["kernels"] = nlohmann::json::array();
  for (const auto& r : p.rows) {
    j["kernels"].push_back({{"label", r.label},
                            {"matmul", r.matmul},
                            {"calls", r.calls},
                            {"us", r.ms * 1e3},
                            {"bytes", r.bytes},
                            {"flops", r.flops}});
  }
  return j.dump();
}

namespace {
bool is_attention(const StepProfile::Row& r) { return r.label == "attention"; }
std::string tflops(double flops, double ms) {
  if (flops <= 0 || ms <= 0) return "";
  const double t = flops / ms / 1e9;
  return fmt::format("{:.{}f}", t, t >= 100 ? 0 : t >= 1 ? 1 : 3);
}
}  // namespace

std::string format_prefill_profile(const StepProfile& p, double ttft_ms) {
  const double total = p.total_ms();
  double attention_ms = 0, attention_flops = 0, matmul_flops = 0;
  for (const auto& r : p.rows) {
    if (is_attention(r)) attention_ms += r.ms, attention_flops += r.flops;
    if (r.matmul) matmul_flops += r.flops;
  }
  const double other_ms = p.other_ms - attention_ms;
  auto share = [&](double ms) { return total > 0 ? 100 * ms / total : 0.0; };
  std::string s = fmt::format("Prefill breakdown (eager, one event per kernel, mean of {} prefills):\n", p.steps);
  s += fmt::format("  {:<44} {:>6} {:>10} {:>6} {:>9} {:>9}\n", "kernel", "calls", "us", "share", "TFLOP/s", "GB/s");
  for (const auto& r : p.rows) {
    // GB/s of the activations an element-wise kernel moves at least (a matmul's bytes are its
    // weights: not its limit here).
    const std::string gbps =
        !r.matmul && r.bytes > 0 && r.ms > 0 ? fmt::format("{:.0f}", double(r.bytes) / (r.ms * 1e-3) / 1e9) : "";
    s += fmt::format("  {:<44} {:>6.0f} {:>10.1f} {:>5.1f}% {:>9} {:>9}\n", r.label + (r.matmul ? " *" : ""), r.calls,
                     r.ms * 1e3, share(r.ms), tflops(r.flops, r.ms), gbps);
  }
  s += fmt::format(
      "  GEMMs (*): {:.1f} us ({:.1f}%, {} TFLOP/s), attention: {:.1f} us ({:.1f}%, {} TFLOP/s), other kernels: "
      "{:.1f} us ({:.1f}%), sum {:.1f} us\n",
      p.matmul_ms * 1e3, share(p.matmul_ms), tflops(matmul_flops, p.matmul_ms), attention_ms * 1e3, share(attention_ms),
      tflops(attention_flops, attention_ms), other_ms * 1e3, share(other_ms), total * 1e3);
  if (p.host_ms > 0) {
    s += fmt::format(
        "  host time to queue the prefill: {:.1f} us (a GPU queues it behind a 20 ms busy kernel: a host time "
        "past 20 ms means it waited on the GPU part-way)\n",
        p.host_ms * 1e3);
  }
  if (ttft_ms > 0) {
    s += fmt::format("  TTFT as benchmarked: {:.1f} us; minus the sum: {:+.1f} us (launch gaps, host work, copies)\n",
                     ttft_ms * 1e3, (ttft_ms - total) * 1e3);
  }
  return s;
}

std::string prefill_profile_json(const StepProfile& p, double ttft_ms) {
  auto j = nlohmann::json::parse(profile_json(p, ttft_ms));
  j.erase("step_us");
  j.erase("position");
  j["ttft_us"] = ttft_ms * 1e3;
  j["host_us"] = p.host_ms * 1e3;
  return j.dump();
}

}  // namespace tunableop::llm
