// The non-GEMM kernels of the forward pass on the CPU, fp32, row-major. Each is the plain loop
// that says what the op computes (OpenMP over rows); the GEMMs, where the time goes, are
// tunableop's business. Layouts:
//   activations  [rows, width]; a "row" is one token of one sequence
//   qkv row      [q heads | k heads | v heads], each head `head_dim` wide
//   gate_up row  [gate (I) | up (I)]
//   KV cache     per layer [batch][kv_head][max_seq][head_dim] (one for K, one for V)
#pragma once

#include <cstdint>
#include <vector>

#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/rope.h"

namespace tunableop::llm::cpu {

// out[r] = table[ids[r]] * scale.
void embedding(const int32_t* ids, int64_t rows, const float* table, int64_t width, float scale, float* out);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w      (Llama)
//        = x[r] / sqrt(mean(x[r]^2) + eps) * (1 + w) (Gemma, add_one)
void rmsnorm(const float* x, const float* w, int64_t rows, int64_t width, float eps, bool add_one, float* out);

// Rotate-half RoPE, in place, on the first `heads` heads of each row (the q and k heads of a
// qkv row): x[i] <- x[i] cos - x[i + d/2] sin, x[i + d/2] <- x[i + d/2] cos + x[i] sin.
void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
          const RopeTable& table);

// Copies the k and v heads of each qkv row into the cache at (seqs[r], positions[r]).
void store_kv(const float* qkv, int64_t rows, int64_t row_stride, int64_t q_dim, const int32_t* seqs,
              const int32_t* positions, const KvLayout& kv, float* k_cache, float* v_cache);

// The score transform and mask of a layer's attention: the scale, Gemma-2's softcap
// (cap * tanh(s / cap); 0: none) and a sliding window (0: none).
struct ScoreRule {
  float scale = 1;
  float softcap = 0;
  int64_t window = 0;
};

// For each row r and query head h: softmax(rule(q . k_j)) over cache positions
// j = 0..positions[r] of sequence seqs[r] (causal: a token never sees a later one, so right
// padding is never attended to; a window keeps the last `window` of them), then the weighted sum
// of v_j. Query head h reads kv head h / (n_heads / n_kv_heads) (GQA; MQA when n_kv_heads = 1).
// out is [rows, n_heads * head_dim].
void attention(const float* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, const int32_t* seqs,
               const int32_t* positions, const KvLayout& kv, const float* k_cache, const float* v_cache,
               const ScoreRule& rule, float* out);

// Prefill attention as GEMMs (see cpu_engine.cc): the (rotated) q heads of `tokens` rows per
// sequence, regrouped so each kv head's query heads form one matrix:
// q_perm[seq][kv_head][t][group][head_dim], t = row % tokens, seq = row / tokens.
void permute_q(const float* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t n_kv_heads,
               int64_t head_dim, int64_t tokens, float* q_perm);
// scores [mats][rows][cols] (scaled) -> causal softmax in place; row r is token r / group and
// sees columns 0..r / group, the last `window` of them with a window (the rest become 0); scores
// are softcapped first when rule.softcap > 0 (rule.scale is not applied: the GEMM did).
void causal_softmax(float* scores, int64_t mats, int64_t rows, int64_t cols, int64_t group, const ScoreRule& rule);
// o_perm [seq][kv_head][t][group][head_dim] -> attn [seq * tokens + t][(kv_head * group + i) * head_dim]
void unpermute_heads(const float* o_perm, int64_t seqs, int64_t n_kv_heads, int64_t tokens, int64_t group,
                     int64_t head_dim, float* attn);

// out[r, i] = act(gate_up[r, i]) * gate_up[r, I + i].
void gated_activation(const float* gate_up, int64_t rows, int64_t inter, Activation act, float* out);

// x += y
void add_inplace(float* x, const float* y, int64_t n);

// out[i] = x[rows[i]]
// out[i] = x[rows[i]], rows of row_bytes bytes.
void gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out);

// Index of the largest value of each row; the first one on ties (as torch.argmax).
void argmax_rows(const float* x, int64_t rows, int64_t width, int32_t* out);

// Streaming bandwidth: a copy of `bytes` (a multiple of 1 MiB) between two fresh buffers on the
// OpenMP threads the engine uses, bytes read + written per second (GB/s), the best of 3 copies
// after one warm-up. 0 when the buffers cannot be allocated.
double copy_bandwidth_gbps(size_t bytes);

float silu(float x);
float gelu_tanh(float x);
float gelu_erf(float x);

}  // namespace tunableop::llm::cpu
