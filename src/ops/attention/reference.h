// fp64 reference attention on host memory, the error measure and tolerance every candidate is
// held to, and the index arithmetic of the operand layouts (params.h) shared by host kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/attention/params.h"

namespace tunableop {

// Keys visible to query i of a sequence of `len` keys (kv_len, or kv_lens[b]) and `qlen` real
// queries (q_len, or q_lens[b]); 0 for a padding row (i >= qlen).
inline int64_t attention_visible_keys(const AttentionParams& p, int64_t len, int64_t qlen, int64_t i) {
  if (i >= qlen) return 0;
  return p.causal ? len - qlen + i + 1 : len;
}

// First key visible to query i of such a sequence: 0, or with a sliding window the oldest of
// the `window` keys ending at the query's own position.
inline int64_t attention_first_visible_key(const AttentionParams& p, int64_t len, int64_t qlen, int64_t i) {
  if (p.window <= 0 || i >= qlen) return 0;
  const int64_t end = attention_visible_keys(p, len, qlen, i);
  return end > p.window ? end - p.window : 0;
}

// A scaled score after logit softcapping (p.softcap > 0): cap * tanh(s / cap).
inline double attention_softcapped(const AttentionParams& p, double s) {
  return p.softcap > 0 ? p.softcap * std::tanh(s / p.softcap) : s;
}

// Element offset of key/value row j (head_dim elements) of sequence b, kv head g, in k or v.
inline int64_t attention_kv_row(const AttentionParams& p, const int32_t* block_table, int64_t b, int64_t g, int64_t j) {
  if (!p.paged()) return ((b * p.kv_heads + g) * p.max_seq + j) * p.head_dim;
  const int64_t page = block_table[b * p.pages_per_seq + j / p.page_size];
  return ((page * p.kv_heads + g) * p.page_size + j % p.page_size) * p.head_dim;
}

// Element offset of query (or output) row i of sequence b, head h.
inline int64_t attention_q_row(const AttentionParams& p, int64_t b, int64_t i, int64_t h) {
  return (b * p.q_len + i) * p.q_row_stride + h * p.head_dim;
}
inline int64_t attention_o_row(const AttentionParams& p, int64_t b, int64_t i, int64_t h) {
  return (b * p.q_len + i) * p.o_row_stride + h * p.head_dim;
}

// Length of sequence b (kv_lens[b] when var_kv_len, else kv_len).
inline int64_t attention_seq_len(const AttentionParams& p, const int32_t* kv_lens, int64_t b) {
  return p.var_kv_len ? int64_t(kv_lens[b]) : p.kv_len;
}
// Real queries of sequence b (q_lens[b] when var_q_len, else q_len).
inline int64_t attention_seq_q_len(const AttentionParams& p, const int32_t* q_lens, int64_t b) {
  return p.var_q_len ? int64_t(q_lens[b]) : p.q_len;
}

// Checks the host-side operand contract: pointers present, block-table entries inside the
// pools, kv_lens and q_lens in range. (GPU candidates cannot read device tables; tests and the reference
// call this on the host copies.)
Status check_attention_operands(const AttentionParams& p, const AttentionOperands& host);

// out[b][i][h][d] (compact: batch * q_len * heads * head_dim) in fp64 from host operands.
// p must be valid (with_defaults applied); operands as check_attention_operands accepts.
std::vector<double> attention_reference_f64(const AttentionParams& p, const AttentionOperands& host);

// The same for the query rows `rows` only (indices b * q_len + i): [rows][heads][head_dim]
// (the numerics check of large problems samples rows).
std::vector<double> attention_reference_rows_f64(const AttentionParams& p, const AttentionOperands& host,
                                                 const std::vector<int64_t>& rows);
// Relative error of those rows against their reference; +inf when any element of any output
// row (sampled or not) is NaN/Inf.
double attention_rows_error(const AttentionParams& p, const void* out, const std::vector<int64_t>& rows,
                            const std::vector<double>& ref);

// ||out - ref|| / ||ref|| over the output rows (row gaps ignored); NaN/Inf give +inf.
double attention_relative_error(const AttentionParams& p, const void* out, const std::vector<double>& ref);

// What a correct candidate stays under (fp32 softmax, probabilities rounded to the storage
// type before the PV product in the tensor-core kernels).
double attention_tolerance(const AttentionParams& p);

}  // namespace tunableop
