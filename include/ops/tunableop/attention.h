// The Attention op: out = softmax(scale * q k^T + mask) v, per sequence and query head, with the
// key/value heads shared by groups of query heads (MHA, GQA, MQA) and the keys read from a KV
// cache that is either one contiguous block per sequence or fixed-size pages anywhere in
// memory (a block table per sequence maps positions to pages).
//
// Layouts (elements of `dtype`; head_dim contiguous everywhere):
//   q   [batch][q_len] rows of heads x head_dim, q_row_stride apart (the engine's fused qkv
//       row is a wider row: pass its stride)
//   out [batch][q_len] rows of heads x head_dim, o_row_stride apart
//   k, v contiguous: [batch][kv_heads][max_seq][head_dim] (the engine's cache today)
//        paged:      pools [num_pages][kv_heads][page_size][head_dim]; key j of sequence b is
//                    slot j % page_size of page block_table[b * pages_per_seq + j / page_size]
// Causal: the q_len queries are the LAST q_len positions of the sequence's keys (decode and
// prefill-with-cache), so query i sees keys 0 .. kv_len - q_len + i.
// Variable lengths (var_kv_len): operand kv_lens[b] (1 <= kv_lens[b] <= kv_len, and >= the
// sequence's query count when causal) replaces kv_len for sequence b; kv_len is then the
// maximum. Read on the device by CUDA kernels, so a captured graph replays correctly as
// sequences grow.
// Variable query counts (var_q_len, padded batches of prompts of different lengths): operand
// q_lens[b] (1 <= q_lens[b] <= q_len) real queries of sequence b occupy its first q_lens[b] rows
// (the last q_lens[b] positions of its keys when causal); rows q_lens[b] .. q_len - 1 are
// padding and are written as zeros.
// Sliding window (window > 0, causal only; Mistral, Gemma-2's local layers): the query at key
// position i sees keys i - window < j <= i, the `window` latest ones; keys before them are never
// read (a paged cache may still hold their pages).
// Logit softcapping (softcap > 0; Gemma-2): each scaled score s becomes softcap * tanh(s /
// softcap) before the mask and the softmax.
#pragma once

#include <cstdint>
#include <string>

#include "tunableop/op.h"
#include "tunableop/status.h"
#include "tunableop/types.h"

namespace tunableop {

struct AttentionOp;

struct AttentionParams {
  using Op = AttentionOp;
  DType dtype = DType::kBF16;  // q, k, v, out; softmax and accumulation in fp32
  bool causal = true;
  int64_t batch = 1;
  int64_t q_len = 1;
  int64_t kv_len = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;  // divides heads
  int64_t head_dim = 128;
  double scale = 0.0;                          // 0 -> 1 / sqrt(head_dim)
  int64_t q_row_stride = 0, o_row_stride = 0;  // 0 -> heads * head_dim
  int64_t max_seq = 0;                         // contiguous cache: positions per sequence (0 -> kv_len)
  int64_t page_size = 0;                       // 0: contiguous cache; else tokens per page
  int64_t pages_per_seq = 0;                   // paged: block table row length (0 -> ceil(kv_len / page_size))
  int64_t num_pages = 0;                       // paged: pages in each pool (0 -> batch * pages_per_seq)
  bool var_kv_len = false;                     // per-sequence lengths in AttentionOperands::kv_lens
  bool var_q_len = false;                      // per-sequence query counts in AttentionOperands::q_lens
  int64_t window = 0;                          // sliding window: keys a query sees, itself included (0: all)
  double softcap = 0.0;                        // scores become softcap * tanh(s / softcap) (0: no cap)

  bool operator==(const AttentionParams&) const = default;
  bool paged() const { return page_size > 0; }
  int64_t group() const { return heads / kv_heads; }
  double softmax_scale() const;
  // Fills the fields left at 0 with their defaults.
  AttentionParams with_defaults() const;
  // Names the first bad field (after with_defaults()).
  Status validate() const;
  // Elements each operand spans (what a buffer must hold); block table in int32 entries.
  int64_t q_span() const;
  int64_t o_span() const;
  int64_t kv_span() const;  // one of k, v (contiguous cache or one page pool)
  int64_t block_table_span() const { return paged() ? batch * pages_per_seq : 0; }
  // 4 * b * h * q * k * d (QK^T and PV), halved over the causal triangle as seen by the
  // queries (sum of visible keys per query, at most `window` each); uses kv_len for every
  // sequence.
  double flops() const;
  // Bytes of K and V that must be read at least once (decode's floor): visible keys only (the
  // window's when there is one).
  double kv_bytes() const;
};

struct AttentionOperands {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const int32_t* block_table = nullptr;  // paged only: [batch][pages_per_seq]
  const int32_t* kv_lens = nullptr;      // var_kv_len only: [batch]
  const int32_t* q_lens = nullptr;       // var_q_len only: [batch]
  void* stream = nullptr;                // cudaStream_t on CUDA
  void* workspace = nullptr;             // see the candidate's workspace size; null -> its own
  size_t workspace_bytes = 0;
};

struct AttentionOp {
  using Params = AttentionParams;
  using Operands = AttentionOperands;
};
// Backends register these into Registry::list<AttentionCandidate>(), Default (the math path)
// first on each device.
using AttentionCandidate = Candidate<AttentionOp>;
using AttentionPlan = Plan<AttentionOp>;
extern template class Plan<AttentionOp>;

// Runs it through the context: the tuned solution, tuning on a miss (when tuning is on), or
// Default. One problem per (shape, cache layout): the engine's decode reads each sequence's
// length from operands.kv_lens on the device, so every decode step is the same problem.
Status attention(Context& ctx, const AttentionParams& p, const AttentionOperands& ops);
StatusOr<AttentionPlan> make_plan(Context& ctx, const AttentionParams& p);

// Problem key in the PyTorch TunableOp style:
//   op      AttentionTunableOp_<BFloat16|Half|float>_<causal|full>
//   params  b<batch>_q<q_len>_k<kv_len>_h<heads>_kv<kv_heads>_d<head_dim>
//           [_p<page_size>[_pp<pages_per_seq>][_np<num_pages>]] [_ms<max_seq>] [_vk] [_vq]
//           [_qs<q_row_stride>] [_os<o_row_stride>] [_sc<scale>] [_w<window>] [_cap<softcap>]
// Optional fields appear only when they differ from their defaults. The scale and the softcap
// are written in their shortest form that reads back to the same double.
std::string attention_op_signature(const AttentionParams& p);
std::string attention_params_signature(const AttentionParams& p);
StatusOr<AttentionParams> parse_attention_signature(const std::string& op, const std::string& params);

}  // namespace tunableop
