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

#include "llm/config.h"
#include "llm/device_kernels.h"
#include "llm/kv_cache.h"
#include "tunableop/attention.h"

namespace tunableop::llm {

struct LayerAttention {
  AttentionParams params;
  AttentionOperands operands;  // stream and workspace left to the device
};

StatusOr<LayerAttention> layer_attention(const ModelConfig& c, DType dtype, const Pass& p, int64_t layer,
                                         const void* qkv, KvCache& cache, void* out);

}  // namespace tunableop::llm
