// The cluster decode attention kernel (decode_cluster_kernel.cuh) as candidates:
// `Attn_DecodeCluster_c<cluster>_w<warps>`: a thread-block cluster of `cluster` blocks per
// (sequence, kv head), `warps` warps each, 16-key tiles on tensor cores, the partials merged
// through (distributed) shared memory in the same launch. For decode against short caches with
// up to 8 query rows per kv head (q_len * heads / kv_heads <= 8), on sm_90 devices.
// `Attn_DecodeCluster_c<cluster>_w<warps>_sp<splits>[_s2]`: `splits` such clusters per (sequence,
// kv head) for long caches, merged through the workspace by the last block of each rank in the
// same launch; `_s2`: each warp's next tile in flight while it works on the current one.
#pragma once

#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

std::vector<AttentionCandidate> decode_cluster_candidates();

}  // namespace tunableop::cuda
