// All-reduce among host threads: a Communicator whose "devices" are ranks in host memory, and
// its candidates. Sums accumulate in fp32 (fp64 for fp64) over the ranks in rank order, so every
// rank and every candidate gets the same bits.
//   Default       group mode: one pass over the whole vector per rank into an fp32 scratch,
//                 then one pass per rank to write it out. Rank mode: each rank's thread sums
//                 its slice of the vector (1 / world of it) over every rank, then copies the
//                 whole sum out (three barriers: publish, reduced, copied).
//   Host_Blocked  the same, a block of elements at a time (cache-sized), so the scratch stays
//                 in cache between the sum and the copies.
#pragma once

#include "tunableop/registry.h"

namespace tunableop::cpu {

// The CPU's CommunicatorFactory and the all-reduce candidates above.
void register_host_all_reduce(Registry& r);

}  // namespace tunableop::cpu
