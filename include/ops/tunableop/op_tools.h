// What the op framework lends to programs that measure or tune outside a plan: the CLI's
// `bench` and `tune`, benchmarks, tests, the engine when it prepares a plan before a CUDA graph
// is captured. For every single-device op (GEMM, GemmAndBias, Attention, FusedLinear): random
// operands of a problem on a context's device, the candidates for it, its tuning problem, and
// offline tuning; for checking results by hand, element access in fp64 and the all-reduce's
// reference. Declared here, instantiated once per op in the library (src/ops/<op>/dispatch.cc),
// so that nothing of the framework's internals (src/ops/framework) reaches its users.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tunableop/all_reduce.h"
#include "tunableop/op.h"
#include "tunableop/status.h"
#include "tunableop/tuner.h"
#include "tunableop/types.h"

namespace tunableop {

class Context;
struct DeviceRuntime;

// Random operands of one problem on the context's device (uniform in [-1, 1]; an op whose
// buffers hold more than numbers fills those validly: attention's page tables and lengths),
// freed on destruction. Sizes are checked against host memory before anything is allocated.
template <class Op>
class RandomOperands {
 public:
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;

  static StatusOr<std::unique_ptr<RandomOperands>> make(Context& ctx, const Params& params, uint64_t seed = 1,
                                                        void* stream = nullptr);
  ~RandomOperands();
  RandomOperands(const RandomOperands&) = delete;
  RandomOperands& operator=(const RandomOperands&) = delete;
  const Params& params() const { return params_; }  // normalized (dense defaults filled in)
  const Operands& operands() const { return operands_; }

 private:
  RandomOperands() = default;
  const DeviceRuntime* runtime_ = nullptr;
  Params params_{};
  std::vector<void*> buffers_;
  Operands operands_{};
};

template <class Op>
struct OpTools {
  using Params = typename Op::Params;
  using Operands = typename Op::Operands;
  // The candidates for p on the context's device at the given search effort: Default first,
  // then the static ones in registration order, then family expansions.
  static std::vector<Candidate<Op>> candidates(Context& ctx, const Params& p, int search_effort);
  // The tuning problem the tuner (and `bench`, through tuner.h's time_runs) measures: rotating
  // copies of `source`'s inputs, workspace, NaN-poisoned outputs, the numerics check.
  // `candidates` must start with Default.
  static StatusOr<std::unique_ptr<TuningProblem>> tuning_problem(Context& ctx, const Params& p, const Operands& source,
                                                                 std::vector<Candidate<Op>> candidates);
  // Tunes p now on random operands (regardless of the enabled and tuning settings) and stores
  // the winner like any result; with `retune` even when a result exists.
  static StatusOr<TuningReport> tune(Context& ctx, const Params& p, bool retune = false, void* stream = nullptr);
};

// Element `idx` of a host buffer of `dtype`, as double, and back (rounded once to the dtype).
double load_as_double(DType dtype, const void* base, int64_t idx);
void store_from_double(DType dtype, void* base, int64_t idx, double v);

// The all-reduce's fp64 reference (tunableop/all_reduce.h): the sum of every rank's input
// (inputs[r]: rank r's input in host memory, p.count elements of p.dtype), the relative
// Frobenius error of an output (host, p.output_dtype()) against it (+inf for NaN/Inf), and the
// error a correct candidate stays under.
std::vector<double> all_reduce_reference(const AllReduceParams& p, const std::vector<const void*>& inputs);
double all_reduce_error(const AllReduceParams& p, const void* output, const std::vector<double>& ref);
double all_reduce_tolerance(const AllReduceParams& p);
// v rounded to `t` (fp32, bf16, fp16; fp64 unchanged), as a kernel rounds an fp32 sum.
double round_as(DType t, double v);

}  // namespace tunableop
