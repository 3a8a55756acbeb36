// The streaming decode attention kernel (decode_stream_kernel.cuh) as candidates:
// `Attn_DecodeStream_c<cluster>_k<keys>_s<stages>_w<warps>[_sp<splits>]`: `splits` (default 1)
// thread-block clusters of `cluster` blocks per (sequence, kv head), each block streaming its share
// of the keys in chunks of `keys` through a ring of `stages` bulk copies worked on by `warps`
// warps, the partials merged through distributed shared memory and (several splits) the
// workspace, by the last cluster to finish, in the same launch. For decode with 1-4 query rows per kv head (at
// most 512 row dims: 2 rows at d256) against long caches, on sm_90 devices.
#pragma once

#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

std::vector<AttentionCandidate> decode_stream_candidates();

}  // namespace tunableop::cuda
