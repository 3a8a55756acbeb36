// All-reduce dispatch internals shared with the CLI (`tunableop allreduce`: the latency table)
// and the tests.
#pragma once

#include <string>
#include <vector>

#include "tunableop/all_reduce.h"

namespace tunableop {

// The candidates for p on the context's device at the given effort, Default first.
std::vector<AllReduceCandidate> all_reduce_candidates_for(Context& ctx, const AllReduceParams& p, int search_effort);

// A candidate by its stored name; NotFound if none.
StatusOr<AllReduceCandidate> find_all_reduce_candidate(Context& ctx, const AllReduceParams& p, const std::string& name);

}  // namespace tunableop
