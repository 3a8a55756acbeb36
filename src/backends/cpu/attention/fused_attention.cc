// Fused blocked attention on the CPU: per work item (sequence, kv head, block of query
// positions, share of the keys), the group's query heads packed as rows, keys visited in
// blocks with an online softmax (running max and sum per row), fp32 throughout. Work items
// that split the keys keep (max, sum, unnormalised output) per row and are merged afterwards,
// so decode (one query, few kv heads) still spreads over the cores.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/attention/cpu_attention.h"
#include "backends/cpu/kernels/driver_common.h"
#include "ops/attention/reference.h"

namespace tunableop::cpu_attention {

void load_attention_row(DType dt, const void* base, int64_t off, int64_t n, float* dst) {
  switch (dt) {
    case DType::kF32: std::memcpy(dst, static_cast<const float*>(base) + off, size_t(n) * sizeof(float)); return;
    case DType::kBF16: {
      const bf16* src = static_cast<const bf16*>(base) + off;
      for (int64_t e = 0; e < n; ++e) dst[e] = to_float(src[e]);
      return;
    }
    case DType::kF16: {
      const fp16* src = static_cast<const fp16*>(base) + off;
      for (int64_t e = 0; e < n; ++e) dst[e] = to_float(src[e]);
      return;
    }
    default: return;
  }
}

void store_attention_row(DType dt, void* base, int64_t off, int64_t n, const float* src, float mul) {
  switch (dt) {
    case DType::kF32: {
      float* dst = static_cast<float*>(base) + off;
      for (int64_t e = 0; e < n; ++e) dst[e] = src[e] * mul;
      return;
    }
    case DType::kBF16: {
      bf16* dst = static_cast<bf16*>(base) + off;
      for (int64_t e = 0; e < n; ++e) dst[e] = to_bf16(src[e] * mul);
      return;
    }
    case DType::kF16: {
      fp16* dst = static_cast<fp16*>(base) + off;
      for (int64_t e = 0; e < n; ++e) dst[e] = to_fp16(src[e] * mul);
      return;
    }
    default: return;
  }
}

namespace {

// Per-row online-softmax state of one work item: running max (natural-log units of the scaled
// scores), running sum, unnormalised output.
struct RowState {
  std::vector<float> max, sum, acc;  // rows, rows, rows x head_dim
};

struct Scratch {
  std::vector<float> q, kt, v, s;
};

// Processes keys [k_begin, k_end) for the rows of one (b, g, query block).
void attend_block(const AttentionParams& p, const AttentionOperands& o, const FusedConfig& cfg, int64_t b, int64_t g,
                  int64_t i0, int64_t npos, int64_t k_begin, int64_t k_end, int64_t len, int64_t qlen, RowState& st,
                  Scratch& sc) {
  const int64_t d = p.head_dim, group = p.group(), rows = npos * group, kb = cfg.key_block;
  const float scale = float(p.softmax_scale()), cap = float(p.softcap);
  sc.q.resize(size_t(rows * d));
  sc.kt.resize(size_t(d * kb));
  sc.v.resize(size_t(kb * d));
  sc.s.resize(size_t(rows * kb));
  for (int64_t r = 0; r < rows; ++r) {
    float* qr = sc.q.data() + r * d;
    load_attention_row(p.dtype, o.q, attention_q_row(p, b, i0 + r / group, g * group + r % group), d, qr);
    for (int64_t e = 0; e < d; ++e) qr[e] *= scale;
  }
  st.max.assign(size_t(rows), -std::numeric_limits<float>::infinity());
  st.sum.assign(size_t(rows), 0.f);
  st.acc.assign(size_t(rows * d), 0.f);
  std::vector<float> krow(static_cast<size_t>(d));
  for (int64_t j0 = k_begin; j0 < k_end; j0 += kb) {
    const int64_t nk = std::min(kb, k_end - j0);
    for (int64_t j = 0; j < nk; ++j) {
      const int64_t off = attention_kv_row(p, o.block_table, b, g, j0 + j);
      load_attention_row(p.dtype, o.k, off, d, krow.data());
      for (int64_t e = 0; e < d; ++e) sc.kt[size_t(e * kb + j)] = krow[size_t(e)];  // transposed: j contiguous
      load_attention_row(p.dtype, o.v, off, d, sc.v.data() + j * d);
    }
    for (int64_t r = 0; r < rows; ++r) {
      // Keys [first, visible) of the row, the block's [jlo, jhi).
      const int64_t visible = attention_visible_keys(p, len, qlen, i0 + r / group);
      const int64_t first = attention_first_visible_key(p, len, qlen, i0 + r / group);
      const int64_t jlo = std::clamp<int64_t>(first - j0, 0, nk), jhi = std::clamp<int64_t>(visible - j0, 0, nk);
      if (jhi <= jlo) continue;
      float* s = sc.s.data() + r * kb;
      const float* qr = sc.q.data() + r * d;
      std::fill(s + jlo, s + jhi, 0.f);
      for (int64_t e = 0; e < d; ++e) {
        const float qe = qr[e];
        const float* kte = sc.kt.data() + e * kb;
#pragma omp simd
        for (int64_t j = jlo; j < jhi; ++j) s[j] += qe * kte[j];
      }
      if (cap > 0.f)
        for (int64_t j = jlo; j < jhi; ++j) s[j] = cap * std::tanh(s[j] / cap);
      float mx = st.max[size_t(r)];
      for (int64_t j = jlo; j < jhi; ++j) mx = std::max(mx, s[j]);
      const float corr = std::exp(st.max[size_t(r)] - mx);  // exp(-inf) = 0 on the first block
      st.max[size_t(r)] = mx;
      float sum = 0.f;
      for (int64_t j = jlo; j < jhi; ++j) {
        s[j] = std::exp(s[j] - mx);
        sum += s[j];
      }
      st.sum[size_t(r)] = st.sum[size_t(r)] * corr + sum;
      float* acc = st.acc.data() + r * d;
      for (int64_t e = 0; e < d; ++e) acc[e] *= corr;
      for (int64_t j = jlo; j < jhi; ++j) {
        const float pj = s[j];
        const float* vj = sc.v.data() + j * d;
#pragma omp simd
        for (int64_t e = 0; e < d; ++e) acc[e] += pj * vj[e];
      }
    }
  }
}

}  // namespace

Status fused_attention(const AttentionParams& params, const AttentionOperands& o, const FusedConfig& cfg) {
  const AttentionParams p = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  TUNABLEOP_RETURN_IF_ERROR(check_attention_operands(p, o));
  if (cfg.query_block < 1 || cfg.key_block < 1) return Status::invalid_argument("fused attention: block sizes >= 1");
  const int threads = cpu_kernels::resolve_threads(cfg.threads);
  const int64_t d = p.head_dim, group = p.group();
  const int64_t qblocks = cpu_kernels::ceil_div(p.q_len, cfg.query_block);
  const int64_t items = p.batch * p.kv_heads * qblocks;
  // Split the keys when there are fewer work items than threads (decode), never below one
  // key block per share.
  const int64_t key_blocks = cpu_kernels::ceil_div(p.kv_len, cfg.key_block);
  const int64_t splits = items >= threads ? 1 : std::min(key_blocks, cpu_kernels::ceil_div(threads, items));
  const int64_t max_rows = std::min<int64_t>(cfg.query_block, p.q_len) * group;
  // Split partials: per (item, split) and row: max, sum, then head_dim outputs.
  std::vector<float> partial(splits > 1 ? size_t(items * splits * max_rows * (d + 2)) : 0);

  // A work item's place; rows of padding queries (i >= qlen) see no key and store zeros.
  auto item_place = [&](int64_t item, int64_t& b, int64_t& g, int64_t& i0, int64_t& npos, int64_t& len, int64_t& qlen,
                        int64_t& lo, int64_t& hi) {
    const int64_t qb = item % qblocks, bg = item / qblocks;
    b = bg / p.kv_heads, g = bg % p.kv_heads;
    i0 = qb * cfg.query_block;
    npos = std::min<int64_t>(cfg.query_block, p.q_len - i0);
    len = attention_seq_len(p, o.kv_lens, b);
    qlen = attention_seq_q_len(p, o.q_lens, b);
    // The block's last real query sees the most.
    hi = i0 < qlen ? attention_visible_keys(p, len, qlen, std::min(i0 + npos, qlen) - 1) : 0;
    // and the first sees the oldest key (a sliding window's start; keys before it are not read).
    lo = i0 < qlen ? attention_first_visible_key(p, len, qlen, i0) : 0;
  };

  cpu_kernels::parallel_for(items * splits, threads, [&](int64_t work) {
    thread_local Scratch sc;
    thread_local RowState st;
    const int64_t item = work / splits, split = work % splits;
    int64_t b, g, i0, npos, len, qlen, lo, hi;
    item_place(item, b, g, i0, npos, len, qlen, lo, hi);
    const int64_t blocks = cpu_kernels::ceil_div(hi - lo, cfg.key_block);
    const int64_t per = cpu_kernels::ceil_div(blocks, splits);
    const int64_t k_begin = std::min(hi, lo + split * per * cfg.key_block);
    const int64_t k_end = std::min(hi, lo + (split + 1) * per * cfg.key_block);
    attend_block(p, o, cfg, b, g, i0, npos, k_begin, k_end, len, qlen, st, sc);
    const int64_t rows = npos * group;
    for (int64_t r = 0; r < rows; ++r) {
      if (splits == 1) {
        const float s = st.sum[size_t(r)];
        store_attention_row(p.dtype, o.out, attention_o_row(p, b, i0 + r / group, g * group + r % group), d,
                            st.acc.data() + r * d, s > 0.f ? 1.f / s : 0.f);
      } else {
        float* dst = partial.data() + size_t(((item * splits + split) * max_rows + r) * (d + 2));
        dst[0] = st.max[size_t(r)];
        dst[1] = st.sum[size_t(r)];
        std::memcpy(dst + 2, st.acc.data() + r * d, size_t(d) * sizeof(float));
      }
    }
  });
  if (splits == 1) return Status::ok();

  cpu_kernels::parallel_for(items, threads, [&](int64_t item) {
    int64_t b, g, i0, npos, len, qlen, lo, hi;
    item_place(item, b, g, i0, npos, len, qlen, lo, hi);
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t r = 0; r < npos * group; ++r) {
      auto part = [&](int64_t s) { return partial.data() + size_t(((item * splits + s) * max_rows + r) * (d + 2)); };
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s < splits; ++s) mx = std::max(mx, part(s)[0]);
      std::fill(acc.begin(), acc.end(), 0.f);
      float sum = 0.f;
      for (int64_t s = 0; s < splits; ++s) {
        const float* ps = part(s);
        if (ps[1] == 0.f) continue;  // a share with no visible key
        const float w = std::exp(ps[0] - mx);
        sum += w * ps[1];
        for (int64_t e = 0; e < d; ++e) acc[size_t(e)] += w * ps[2 + e];
      }
      store_attention_row(p.dtype, o.out, attention_o_row(p, b, i0 + r / group, g * group + r % group), d, acc.data(),
                          sum > 0.f ? 1.f / sum : 0.f);
    }
  });
  return Status::ok();
}

}  // namespace tunableop::cpu_attention
