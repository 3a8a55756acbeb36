// Measurement helpers shared by the bench command and its suites.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/in_context.h"
#include "tunableop/op_tools.h"
#include "tunableop/tuner.h"

namespace tunableop::cli {

struct CandidateTiming {
  std::string name;
  std::string family;          // the candidate's CandidateInfo::family() ("OpenBLAS gemm", "cuBLASLt algo", ...)
  double median_ms = 0;        // 0 when not measured
  std::string note;            // why not measured (unsupported, numerics, error)
  std::vector<double> rounds;  // ms per run in each interleaved round (the post-decision guard pairs them)
};

// Every candidate of op Op for p on ctx's device (or Default and those named in `only`), each
// checked against the reference and then timed the same way: interleaved rounds over rotating
// input copies, median per candidate.
template <class Op>
StatusOr<std::vector<CandidateTiming>> measure_op_candidates(Context& ctx, const typename Op::Params& params,
                                                             int rounds, double ms_per_sample, void* stream,
                                                             const std::vector<std::string>* only = nullptr) {
  auto bufs = RandomOperands<Op>::make(ctx, params, 7, stream);
  if (!bufs.is_ok()) return bufs.status();
  const auto& p = (*bufs)->params();
  auto cands = OpTools<Op>::candidates(ctx, p, ctx.options().policy.search_effort);
  if (only)
    std::erase_if(cands, [&](const Candidate<Op>& c) {
      return c.name != "Default" && std::find(only->begin(), only->end(), c.name) == only->end();
    });
  auto pr_or = OpTools<Op>::tuning_problem(ctx, p, (*bufs)->operands(), cands);
  if (!pr_or.is_ok()) return pr_or.status();
  auto& pr = **pr_or;
  // The tuner's own pieces (timed runs, interleaved rounds, medians), so that the suite's
  // numbers are measured exactly as tuning measures them.
  size_t rotation = 0;
  std::vector<CandidateTiming> out(cands.size());
  std::vector<int> runs(cands.size(), 0);
  for (size_t i = 0; i < cands.size(); ++i) {
    out[i].name = cands[i].name;
    out[i].family = cands[i].info.family().empty() ? cands[i].name : cands[i].info.family();
    Status st = pr.supports(i);
    if (st.is_ok()) st = pr.check_numerics(i);
    if (st.is_ok()) {  // size the sample from one warm run
      auto one = time_runs(pr, i, 1, &rotation);
      if (one.is_ok())
        runs[i] = std::clamp(int(ms_per_sample / std::max(*one, 1e-4)), 1, 2000);
      else
        st = one.status();
    }
    if (!st.is_ok()) {
      out[i].note = st.is_unsupported() ? "unsupported" : st.to_string();
      (void)pr.recover();
    }
  }
  auto samples = interleaved_rounds(
      cands.size(), InterleavedRounds{rounds, rounds}, pr.timer(),
      [&](size_t i) -> StatusOr<double> {
        if (runs[i] == 0) return Status::unsupported("not measured");
        return time_runs(pr, i, runs[i], &rotation);
      },
      [&](size_t i, const Status& st) {
        if (runs[i] == 0) return;
        out[i].note = st.to_string();
        runs[i] = 0;
      });
  for (size_t i = 0; i < cands.size(); ++i) {
    if (runs[i] == 0) continue;
    out[i].median_ms = median(samples[i]);
    out[i].rounds = std::move(samples[i]);
  }
  return out;
}

// The post-decision guard for one suite shape (issue 31): the tuned choice against Default in
// the suite's own measurement of every candidate (interleaved rounds, under the load that
// measurement puts on the device: dozens of candidates back to back keep a GPU at its power
// cap). A choice that loses there is reverted: Default in force and written to the results file
// with a note (tunableop/in_context.h, revert_to_default). Returns the verdict; rounds 0 when
// there was nothing to judge (Default chosen, or a side unmeasured).
StatusOr<ChoiceVerdict> guard_suite_choice(Context& ctx, const GemmParams& p, const std::string& chosen,
                                           const std::vector<CandidateTiming>& timings);

// measure_op_candidates for GEMM.
StatusOr<std::vector<CandidateTiming>> measure_candidates(Context& ctx, const GemmParams& p, int rounds,
                                                          double ms_per_sample, void* stream);

// Median ms per call of gemm() through the context's dispatch (whatever it chooses), over
// `rounds` samples of about ms_per_sample each, on one set of buffers (the seed's loop).
StatusOr<double> time_dispatch(Context& ctx, const GemmParams& p, const GemmOperands& ops, int rounds,
                               double ms_per_sample);

// Device ceilings measured once per run: copy bandwidth (bytes read + written per second) and
// the best GEMM rate over all candidates on a large compute-bound shape.
struct Ceilings {
  double copy_gbs = 0;
  double gemm_gflops = 0;
  std::string gemm_shape;
  std::string gemm_solution;
};
StatusOr<Ceilings> measure_ceilings(Context& ctx, DType dtype, void* stream);
// The copy ceiling alone (GB/s, bytes read + written).
StatusOr<double> measure_copy_gbs(Context& ctx, void* stream);

// Tuning on, into `results` (kept) or, when empty, a fresh temporary file (so that tuning time is
// real); returns the path to remove afterwards ("" when the caller's file is kept).
std::string tune_into_results(Context& ctx, const std::string& results);
// Removes that temporary results file and its .stats sidecar (a failure to is harmless).
void remove_temp_results(const std::string& path);

// Memory floor in ms: each operand read once, C written once (and read when beta != 0).
double bytes_moved(const GemmParams& p);

}  // namespace tunableop::cli
