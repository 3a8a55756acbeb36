// Random attention problems on the host for kernel tests: inputs drawn fresh per seed, paged
// caches with pages shuffled through a pool larger than needed, every cache slot past a
// sequence's length (and every spare page) poisoned with NaN so a kernel that reads them
// fails, and the output poisoned with NaN so a kernel that skips an element fails too.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/attention/params.h"

namespace tunableop::testing {

struct HostAttention {
  AttentionParams p;  // with_defaults applied
  std::vector<uint8_t> q, k, v, out;
  std::vector<int32_t> block_table, kv_lens, q_lens;
  std::vector<double> ref;  // fp64 reference, [batch][q_len][heads][head_dim]

  AttentionOperands operands();  // host pointers (out included)
};

// `spare_pages` extra pages in each pool (paged only); keys no query sees (before a sliding
// window) stay poisoned like the slots past a sequence's length. Per-sequence query counts drawn in
// [1, q_len] when p.var_q_len, lengths in [max(1, the sequence's queries if causal), kv_len]
// when p.var_kv_len (sequence 0 keeps q_len and kv_len). With both and q_len == kv_len, each
// length equals its query count: the engine's padded batch of prompts.
HostAttention make_attention_problem(const AttentionParams& p, uint64_t seed, int64_t spare_pages = 3);

// Relative error of `out` (laid out like HostAttention::out) against the reference, within the
// dtype's tolerance, with every byte of the row gaps (o_row_stride > heads * head_dim) still
// the poison pattern.
::testing::AssertionResult attention_output_ok(const HostAttention& h, const std::vector<uint8_t>& out,
                                               double* error = nullptr);

// The shapes every attention kernel is checked on, for one dtype: head dims 64/128/256; GQA
// ratios 1, 4, 8 and all (MQA); causal and not; odd lengths (ragged tiles); prefill with a
// cache (q_len < kv_len); decode (q_len 1..5) against long caches; contiguous and paged caches
// (pages 16, 64, 256, shuffled); per-sequence lengths; a fused-qkv input row and an output
// row with a gap; padded batches of prompts of different lengths (per-sequence query counts).
// `long_decode` adds caches long enough for up to 128 key splits. Last: Gemma-2B's and
// Llama-2-7B's decode against short caches (1-300 positions, static and paged, 1-8 queries),
// then non-causal sequences with fewer keys than queries; last, sliding windows and softcapping
// (Mistral's and Gemma-2's attention) in prefill and decode, static and paged, with the keys
// before the first query's window poisoned.
std::vector<AttentionParams> attention_test_shapes(DType dtype, bool long_decode = false);

// Shorthand used in test names and failure messages.
std::string describe(const AttentionParams& p);

}  // namespace tunableop::testing
