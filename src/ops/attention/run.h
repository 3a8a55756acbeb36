// The one call through which the engine (and anything else) runs attention on a context:
// run_attention(ctx, params, operands). Until the Attention tunable op exists it picks a
// candidate from the registry's AttentionCandidate list by a fixed preference (below); the op
// will replace the body of this call, not its callers.
//
// Fixed preference (measured on an H100 in stage 1, docs/results/attention):
//   CUDA, q_len > 16 (prefill): cuDNN SDPA where it applies (contiguous cache, one length),
//        else our flash tile that won at that head dim;
//   CUDA, q_len <= 16 (decode): split-KV with batch * kv_heads * splits near two waves of
//        blocks and at least two key tiles per split;
//   fp32 on CUDA, or nothing else applies: Default (the math path);
//   CPU: the fused blocked kernel.
#pragma once

#include <string>

#include "ops/attention/candidate.h"
#include "ops/attention/params.h"
#include "tunableop/context.h"

namespace tunableop {

Status run_attention(Context& ctx, const AttentionParams& p, const AttentionOperands& o);

// The candidate run_attention uses for p on ctx, or why none applies.
StatusOr<const AttentionCandidate*> choose_attention(Context& ctx, const AttentionParams& p);

}  // namespace tunableop
