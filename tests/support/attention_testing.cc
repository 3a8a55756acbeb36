#include "support/attention_testing.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ops/attention/reference.h"
#include "ops/gemm/reference.h"  // store_from_double

namespace tunableop::testing {

namespace {
constexpr uint8_t kPoison = 0xFF;  // all-ones: NaN in fp32, bf16 and fp16
}

AttentionOperands HostAttention::operands() {
  AttentionOperands o;
  o.q = q.data(), o.k = k.data(), o.v = v.data(), o.out = out.data();
  o.block_table = p.paged() ? block_table.data() : nullptr;
  o.kv_lens = p.var_kv_len ? kv_lens.data() : nullptr;
  o.q_lens = p.var_q_len ? q_lens.data() : nullptr;
  return o;
}

HostAttention make_attention_problem(const AttentionParams& params, uint64_t seed, int64_t spare_pages) {
  HostAttention h;
  AttentionParams p = params;
  if (p.paged() && p.num_pages == 0) {
    p = p.with_defaults();
    p.num_pages = p.batch * p.pages_per_seq + spare_pages;
  }
  h.p = p = p.with_defaults();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  const size_t es = dtype_size(p.dtype);
  h.q.assign(size_t(p.q_span()) * es, kPoison);
  h.out.assign(size_t(p.o_span()) * es, kPoison);
  h.k.assign(size_t(p.kv_span()) * es, kPoison);
  h.v.assign(size_t(p.kv_span()) * es, kPoison);

  h.q_lens.assign(size_t(p.batch), int32_t(p.q_len));
  h.kv_lens.assign(size_t(p.batch), int32_t(p.kv_len));
  for (int64_t b = 1; b < p.batch; ++b) {
    if (p.var_q_len) h.q_lens[size_t(b)] = int32_t(std::uniform_int_distribution<int64_t>(1, p.q_len)(rng));
    if (!p.var_kv_len) continue;
    if (p.var_q_len && p.q_len == p.kv_len) {
      h.kv_lens[size_t(b)] = h.q_lens[size_t(b)];  // prompts padded to one length
      continue;
    }
    const int64_t lo = p.causal ? h.q_lens[size_t(b)] : 1;
    h.kv_lens[size_t(b)] = int32_t(std::uniform_int_distribution<int64_t>(lo, p.kv_len)(rng));
  }
  if (p.paged()) {
    // Pages in a random order through the whole pool: neighbours in a sequence are not
    // neighbours in memory, and spare pages stay poisoned.
    std::vector<int32_t> pages(size_t(p.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    h.block_table.assign(size_t(p.batch * p.pages_per_seq), -1);
    for (size_t i = 0; i < h.block_table.size() && i < pages.size(); ++i) h.block_table[i] = pages[i];
  }

  // q rows (gaps between rows stay poisoned: nothing may read them).
  for (int64_t r = 0; r < p.batch * p.q_len; ++r)
    for (int64_t e = 0; e < p.heads * p.head_dim; ++e)
      store_from_double(p.dtype, h.q.data(), r * p.q_row_stride + e, 1.5 * uni(rng));
  // k, v only where a sequence has keys some query sees: with a sliding window, the keys before
  // the first query's window stay poisoned (a kernel must not read them).
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t first = attention_first_visible_key(p, h.kv_lens[size_t(b)], h.q_lens[size_t(b)], 0);
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      for (int64_t j = first; j < h.kv_lens[size_t(b)]; ++j) {
        const int64_t off = attention_kv_row(p, h.block_table.data(), b, g, j);
        for (int64_t e = 0; e < p.head_dim; ++e) {
          store_from_double(p.dtype, h.k.data(), off + e, uni(rng));
          store_from_double(p.dtype, h.v.data(), off + e, uni(rng));
        }
      }
    }
  }
  AttentionOperands o = h.operands();
  h.ref = attention_reference_f64(p, o);
  return h;
}

::testing::AssertionResult attention_output_ok(const HostAttention& h, const std::vector<uint8_t>& out, double* error) {
  const AttentionParams& p = h.p;
  const double err = attention_relative_error(p, out.data(), h.ref);
  if (error) *error = err;
  const double tol = attention_tolerance(p);
  if (!(err <= tol)) return ::testing::AssertionFailure() << describe(p) << ": relative error " << err << " > " << tol;
  const size_t es = dtype_size(p.dtype);
  const int64_t width = p.heads * p.head_dim;
  for (int64_t r = 0; r + 1 < p.batch * p.q_len; ++r)
    for (int64_t e = width; e < p.o_row_stride; ++e)
      for (size_t x = 0; x < es; ++x)
        if (out[size_t(r * p.o_row_stride + e) * es + x] != kPoison)
          return ::testing::AssertionFailure() << describe(p) << ": wrote the gap after output row " << r;
  return ::testing::AssertionSuccess();
}

std::vector<AttentionParams> attention_test_shapes(DType dtype, bool long_decode) {
  std::vector<AttentionParams> v;
  auto add = [&](int64_t b, int64_t q, int64_t k, int64_t h, int64_t kvh, int64_t d, bool causal, int64_t page = 0,
                 bool var = false, int64_t q_stride = 0, int64_t o_stride = 0, bool var_q = false) {
    AttentionParams p;
    p.dtype = dtype, p.causal = causal, p.batch = b, p.q_len = q, p.kv_len = k, p.heads = h, p.kv_heads = kvh;
    p.head_dim = d, p.page_size = page, p.var_kv_len = var, p.q_row_stride = q_stride, p.o_row_stride = o_stride;
    p.var_q_len = var_q;
    v.push_back(p);
  };
  for (int64_t d : {64, 128, 256}) {
    add(1, 37, 37, 4, 4, d, true);                                        // MHA, odd prefill
    add(2, 129, 129, 8, 2, d, true);                                      // GQA 4, one row past a tile
    add(1, 70, 150, 16, 2, d, true);                                      // GQA 8, prefill after a cache
    add(2, 45, 93, 8, 1, d, false);                                       // MQA, not causal
    add(1, 1, 1000, 8, 8, d, true);                                       // decode, MHA
    add(3, 1, 533, 8, 1, d, true, 0, true);                               // decode, MQA, ragged lengths
    add(2, 5, 300, 8, 2, d, true, 16);                                    // 5-token decode, pages of 16
    add(1, 1, 2049, 4, 1, d, true, 64);                                   // decode, pages of 64
    add(2, 33, 260, 4, 2, d, false, 256, true);                           // pages of 256, ragged
    add(2, 17, 17, 4, 2, d, true, 0, false, (4 + 2 * 2) * d, 4 * d + 8);  // fused qkv rows, output gap
    // Padded batches of prompts of different lengths (the engine's varlen prefill): fused qkv
    // rows, contiguous and paged (pages of 16), and a prefill after a cache with ragged queries.
    add(4, 136, 136, 8, 2, d, true, 0, true, (8 + 2 * 2) * d, 0, true);
    add(3, 72, 72, 4, 1, d, true, 16, true, 0, 0, true);
    add(3, 24, 200, 8, 8, d, true, 64, true, 0, 0, true);
    // Decode against short caches (the one-launch decode kernel's case): Gemma's MQA 8 reading
    // q from the fused qkv row, GQA 4 with pages of 16 out of order and ragged lengths, two
    // queries per sequence with one kv head for all 8 heads.
    add(1, 1, 251, 8, 1, d, true, 0, false, (8 + 2) * d);
    add(3, 1, 190, 16, 4, d, true, 16, true);
    add(2, 2, 97, 8, 1, d, true, 0, true);
  }
  if (long_decode) {  // enough key tiles for every split count (up to 128 splits of 2 tiles)
    add(1, 1, 8200, 4, 1, 128, true);
    add(2, 2, 4500, 8, 2, 128, true, 64, true);
    add(1, 1, 16500, 8, 1, 256, true);
    add(1, 3, 16500, 4, 2, 64, true, 256, true);
  }
  // Gemma-2B's decode against the short caches of a 256-token benchmark (the cluster decode
  // kernel's case): 8 query rows on one kv head at d256, from a cache of one position to 300,
  // static (longer than the sequence, q from the fused qkv row) and paged (16, 64), ragged
  // lengths, 2-8 queries per sequence (8 x 8 rows: beyond the cluster kernel, for the others).
  // Last in the list, so the shapes above keep the seeds their tests draw.
  add(1, 1, 1, 8, 1, 256, true, 0, false, (8 + 2) * 256);
  add(1, 1, 17, 8, 1, 256, true, 16);
  add(2, 1, 130, 8, 1, 256, true, 0, true, (8 + 2) * 256);
  add(3, 1, 256, 8, 1, 256, true, 64, true);
  add(2, 1, 300, 8, 1, 256, true, 16, true);
  add(2, 4, 77, 2, 1, 256, true, 0, true, 0, 0, true);
  add(1, 8, 300, 8, 1, 256, true, 64);
  add(1, 1, 255, 32, 32, 128, true, 0, false, 3 * 32 * 128);  // Llama-2-7B's decode: one row per kv head
  // Not causal with fewer keys than queries (every query sees every key): the flash kernels
  // once took the negative positions pos0 + i of such rows for padding rows and wrote zeros
  // (seen on fp16 d256 pages of 256, when a ragged draw gave one sequence 6 keys for 33
  // queries). Last, so the shapes above keep their seeds.
  for (int64_t d : {64, 128, 256}) {
    add(1, 48, 20, 8, 2, d, false);       // contiguous, one length
    add(2, 33, 20, 4, 2, d, false, 256);  // pages of 256, every sequence shorter than its queries
  }
  // Sliding windows, logit softcapping and a scale of their own (Mistral, Gemma-2's local and
  // global layers), in prefill (one length, ragged, after a cache) and decode (static and paged,
  // ragged), with windows shorter and longer than the sequences, a window of one key, and the
  // scores spread (scale 0.3) so that the cap bends them. Last, so the shapes above keep their
  // seeds.
  auto add_windowed = [&](int64_t b, int64_t q, int64_t k, int64_t h, int64_t kvh, int64_t d, int64_t window,
                          double softcap, int64_t page = 0, bool var = false, bool var_q = false) {
    add(b, q, k, h, kvh, d, true, page, var, 0, 0, var_q);
    v.back().window = window, v.back().softcap = softcap;
    if (softcap > 0) v.back().scale = 0.3;
  };
  for (int64_t d : {64, 128, 256}) {
    add_windowed(2, 150, 150, 8, 2, d, 40, 0);                  // prefill longer than the window
    add_windowed(3, 96, 96, 4, 1, d, 33, 2.0, 16, true, true);  // padded prompts, pages of 16, softcap
    add_windowed(1, 70, 300, 8, 2, d, 100, 0);                  // prefill after a cache
    add_windowed(3, 1, 700, 8, 1, d, 128, 0, 16, true);         // decode, pages of 16, ragged
    add_windowed(2, 1, 400, 16, 8, d, 64, 1.5, 0, true);        // Gemma-2's local decode
    add_windowed(2, 1, 300, 16, 8, d, 0, 1.5, 64, true);        // Gemma-2's global decode, paged
    add_windowed(1, 3, 90, 8, 2, d, 1, 0);                      // a window of one key
    add_windowed(2, 37, 37, 4, 2, d, 4096, 0.5);                // window beyond the sequence, hard cap
  }
  return v;
}

std::string describe(const AttentionParams& p) {
  return attention_op_signature(p) + "," + attention_params_signature(p);
}

}  // namespace tunableop::testing
