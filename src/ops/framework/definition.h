// What an op tells the framework about itself: OpDefinition<Op>, specialised once per op in
// src/ops/<op>/definition.h. With it, Dispatcher<Op> (dispatch.h) gives the op its plans, its
// plain call, offline tuning and candidate lookup, and OpTuningProblem<Op> (tuning_problem.h)
// its tuning problem: rotating input copies, workspace, NaN-poisoned outputs, the numerics
// check. Nothing else is written per op.
//
//   template <> struct OpDefinition<MyOp> {
//     static constexpr const char* kName = "MyOp";                 // for messages
//     static Params normalize(const Params&);                       // fill defaults (dense ld, ...)
//     static Status validate(const Params&);                        // on normalized params
//     static bool is_empty(const Params&);                          // nothing to compute
//     static Status check_operands(const Params&, const Operands&); // null pointers, ...
//     static std::string op_signature(const Params&);               // results file, column 1
//     static std::string params_signature(const Params&);           // results file, column 2
//     static ProblemKey key(const Params&);                         // what the signatures encode
//     static std::vector<BufferSpec> buffers(const Params&);        // every operand buffer
//     static Operands bind(const Params&, const BoundBuffers&);     // buffers -> operands
//     static std::vector<const void*> sources(const Operands&);     // caller's buffers, same order
//       (or sources(const Params&, const Operands&) where the params decide which are used)
//     static void* stream(const Operands&);
//     static OutputLayout output(const Params&);                    // what numerics compares
//     static double tolerance(const Params&);                       // vs the fp64 reference
//     static HostCheck host_check(const Params&, const std::vector<const void*>& host_buffers);
//     // Optional: fills buffer `i` of random operands itself (true) instead of with random
//     // numbers (attention's page tables and lengths).
//     static bool fill_random(const Params&, size_t i, void* host, std::mt19937_64& rng);
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tunableop/types.h"

namespace tunableop::ops {

template <class Op>
struct OpDefinition;  // specialised per op

// One operand buffer of a problem, as the tuning problem allocates and fills it.
struct BufferSpec {
  enum class Role {
    kInput,        // read only: copied from the caller's buffer into every rotating set
    kOutput,       // written only: poisoned with NaN before a numerics check
    kInputOutput,  // read and written (GEMM's C with beta != 0): copied, restored before a check
  };
  const char* name;  // "A", "bias", ...
  DType dtype;
  int64_t elements;  // the whole span, gaps included
  Role role;
  size_t bytes() const { return size_t(elements) * dtype_size(dtype); }
};

// Buffers of one rotating set (in buffers() order) plus the tuning workspace and stream.
struct BoundBuffers {
  const std::vector<void*>& buffers;
  void* stream;
  void* workspace;
  size_t workspace_bytes;
};

// The output that the numerics check compares: `batch` column-major m x n matrices with
// leading dimension ld, `stride` elements apart, in buffer `buffer`.
struct OutputLayout {
  size_t buffer;
  DType dtype;
  int64_t m, n, ld, batch, stride;
};

// CPU numerics: the error of an output (host memory) against the op's fp64 reference, made
// once per problem from host copies of the pristine buffers (inputs; the original contents of
// input-output buffers; null for outputs). +inf for NaN/Inf or unwritten elements.
using HostCheck = std::function<double(const void* output)>;

}  // namespace tunableop::ops
