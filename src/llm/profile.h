// Where the time of one decode step (issue 13) or one prefill (issue 12) goes: the spans a
// profiled pass records (one per kernel or fused kernel, see DeviceKernels::begin_profile),
// summed over the layers and printed as a table with the matmul kernels apart from the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tunableop::llm {

// Time of one span of a profiled step.
struct ProfileSpan {
  std::string label;    // "qkv.gemm", "attention", "gate_up [fused ...]"
  double ms = 0;        // the work queued between the previous mark and this one
  int64_t bytes = 0;    // weights it streams (0: none); prefill's element-wise kernels: the
                        // activation bytes they move at least
  bool matmul = false;  // a GEMM, or a kernel that contains one
  double flops = 0;     // floating-point work (GEMMs, attention; 0: not counted)
};

// Spans of several profiled steps, grouped by label (first-seen order), per step.
struct StepProfile {
  struct Row {
    std::string label;
    bool matmul = false;
    double calls = 0;   // per step
    double ms = 0;      // per step, summed over its calls
    int64_t bytes = 0;  // per step
    double flops = 0;   // per step
  };
  std::vector<Row> rows;
  int steps = 0;
  int64_t position = 0;                // of the first profiled step's token in its sequence (0: not recorded)
  double matmul_ms = 0, other_ms = 0;  // per step
  double host_ms = 0;                  // prefill: the host's time to queue the pass (mean; 0: not recorded)
  double total_ms() const { return matmul_ms + other_ms; }
};

StepProfile summarize_profile(const std::vector<std::vector<ProfileSpan>>& steps);

// The table: label, calls, us per step, share, weight GB/s of the matmul rows; then the matmul
// and other totals, and, when step_ms > 0 (the step as normally run, e.g. a graph replay), the
// difference, which is launch gaps minus any overlap.
std::string format_profile(const StepProfile& p, double step_ms);
std::string profile_json(const StepProfile& p, double step_ms);

// A prefill's table (issue 12): per kernel as above with TFLOP/s instead of GB/s, then GEMMs,
// attention and everything else apart, and, when ttft_ms > 0 (the prefill as benchmarked), what
// the kernels leave unexplained: launch gaps, host work and synchronisation.
std::string format_prefill_profile(const StepProfile& p, double ttft_ms);
std::string prefill_profile_json(const StepProfile& p, double ttft_ms);

}  // namespace tunableop::llm
