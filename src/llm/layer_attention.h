// The attention problem of one layer of a forward pass, in the terms of the attention op
// (tunableop/attention.h), for any device and either cache: q read in place from the fused
// qkv rows, keys and values from this layer's cache (static: [seq][kv_head][max_seq][head_dim];
// paged: the pools and the device block table), output rows of q_dim.
//   prefill: q_len = kv_len = the padded prompt length; a ragged batch passes each sequence's
//            real length as its query count and key count (padding rows come back as zeros);
//   decode:  q_len 1 against kv_len = max_seq, each sequence's length read on the device from
//            Pass::seq_lens, so one problem (one tuning, one captured graph) serves every step.
#pragma once

#include <cstdint>
#include <string>

#include "llm/config.h"
#include "llm/device_kernels.h"
#include "llm/kv_cache.h"
#include "tunableop/attention.h"
#include "tunableop/context.h"

namespace tunableop::llm {

struct LayerAttention {
  AttentionParams params;
  AttentionOperands operands;  // stream and workspace left to the device
};

StatusOr<LayerAttention> layer_attention(const ModelConfig& c, DType dtype, const Pass& p, int64_t layer,
                                         const void* qkv, KvCache& cache, void* out);

// Decode attention is one problem for every step (lengths read on the device), so tuned on its
// first call it would be timed at the prompt's end, while later steps read up to kv_len keys.
// So its plan is prepared here (Plan::prepare): with TunableOp on and tuning on, a problem not in
// the results is tuned first on random operands at full length (every sequence at kv_len, valid
// page tables: what `tunableop tune` does) and recorded; every later call of the problem finds
// that decision. Returns the solution name: the context's decision ("Default" when TunableOp is
// off; with tuning off, the stored solution or "Default"). Allocates and synchronizes `stream`
// when it tunes; while a CUDA graph is being captured it tunes nothing (the plan's capture
// policy).
StatusOr<std::string> tune_decode_attention(Context& ctx, const AttentionParams& p, void* stream);

}  // namespace tunableop::llm
