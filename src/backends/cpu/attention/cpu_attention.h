// CPU attention kernels (host memory, any dtype of AttentionParams, fp32 arithmetic):
//  - fused: online softmax over key blocks, the score matrix never materialised; OpenMP over
//    (sequence, kv head, query block, key split) work items, GQA heads packed into rows;
//  - math (`Default`): the textbook path, S = Q K^T and O = P V as GEMMs through our blocked CPU kernel,
//    with a masked softmax between (the numerics yardstick of the fused kernel).
#pragma once

#include <vector>

#include "ops/attention/candidate.h"
#include "tunableop/registry.h"

namespace tunableop::cpu_attention {

struct FusedConfig {
  int query_block = 16;  // query positions per work item (times the GQA group = rows)
  int key_block = 64;    // keys per online-softmax step
  int threads = 0;       // 0: every hardware thread
};

Status fused_attention(const AttentionParams& p, const AttentionOperands& o, const FusedConfig& cfg);
Status math_attention(const AttentionParams& p, const AttentionOperands& o, int threads = 0);

// Row conversions shared by the kernels: n elements at base + off <-> fp32 (store multiplies
// by `mul`, rounding once to the storage type).
void load_attention_row(DType dt, const void* base, int64_t off, int64_t n, float* dst);
void store_attention_row(DType dt, void* base, int64_t off, int64_t n, const float* src, float mul);

// `Default` (the math path), then `Attn_Cpu_Fused_q<Q>_k<K>` variants.
std::vector<AttentionCandidate> cpu_attention_candidates();

}  // namespace tunableop::cpu_attention

namespace tunableop {

// Appends cpu_attention_candidates() to r.list<AttentionCandidate>().
void register_cpu_attention(Registry& r);

}  // namespace tunableop
