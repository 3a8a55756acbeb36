// All-reduce on the host: a Communicator whose "devices" are ranks in host memory (host threads
// of this process, or in process mode one process each, the data moving through the
// ProcessGroup: MPI ranks), and its candidates. Sums accumulate in fp32 (fp64 for fp64) over
// the ranks in rank order, so every rank, every candidate and both modes get the same bits.
//   Default       threads, group mode: one pass over the whole vector per rank into an fp32
//                 scratch, then one pass per rank to write it out. Threads, rank mode: each
//                 rank's thread sums its slice of the vector (1 / world of it) over every rank,
//                 then copies the whole sum out (three barriers: publish, reduced, copied).
//                 Processes: every rank's input gathered on every rank, each sums all of it
//                 (one collective; world x the message in memory).
//   Host_Blocked  the same, a block of elements at a time (cache-sized), so the scratch stays
//                 in cache between the sum and the copies.
//   Host_TwoShot  processes: rank q sums slice q (an all-to-all brings every rank's slice q),
//                 then the summed slices are gathered (two collectives, 2 x the message moved
//                 instead of world x). Threads: as Default, which is already this.
#pragma once

#include "tunableop/registry.h"

namespace tunableop::cpu {

// The CPU's CommunicatorFactory and the all-reduce candidates above.
void register_host_all_reduce(Registry& r);

}  // namespace tunableop::cpu
