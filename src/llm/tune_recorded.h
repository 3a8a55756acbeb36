// Tuning a problem later, from its results-file key alone: what a server does in idle time with
// the GEMM and attention problems its requests met untuned (served by Default meanwhile;
// docs/serve.md, "Tuning policy"). Random operands, as `tunableop tune` uses; the winner is
// stored in the context's results (and file), so every plan of the problem picks it up at its
// next revalidation.
#pragma once

#include <string>

#include "tunableop/context.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// Whether `op` is an op this tunes from a key (GEMM, GemmAndBias-free GEMM variants, Attention).
bool tunable_from_key(const std::string& op);

// Tunes (op, params) on the context's device on `stream`; returns the winner's name.
// Unsupported for other ops; a parse error for a key that does not parse.
StatusOr<std::string> tune_recorded(Context& ctx, const std::string& op, const std::string& params, void* stream);

}  // namespace tunableop::llm
