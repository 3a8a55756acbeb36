// Measurement helpers shared by the bench command and its suites.
#pragma once

#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cli {

struct CandidateTiming {
  std::string name;
  std::string family;    // the candidate's CandidateInfo::family() ("OpenBLAS gemm", "cuBLASLt algo", ...)
  double median_ms = 0;  // 0 when not measured
  std::string note;      // why not measured (unsupported, numerics, error)
};

// Every candidate for p on ctx's device, each checked against the reference and then timed
// the same way: interleaved rounds over rotating input copies, median per candidate.
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

// Memory floor in ms: each operand read once, C written once (and read when beta != 0).
double bytes_moved(const GemmParams& p);

}  // namespace tunableop::cli
