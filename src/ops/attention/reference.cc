// fp64 attention reference: scores, max-subtracted softmax and the weighted sum of values, one
// query row at a time, in double throughout.
#include "ops/attention/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/framework/elements.h"  // load_as_double

namespace tunableop {

Status check_attention_operands(const AttentionParams& p, const AttentionOperands& host) {
  auto bad = [](std::string m) { return Status::invalid_argument("attention operands: " + std::move(m)); };
  if (!host.q || !host.k || !host.v || !host.out) return bad("q, k, v and out are required");
  if (p.paged() && !host.block_table) return bad("a paged cache needs block_table");
  if (p.var_kv_len && !host.kv_lens) return bad("var_kv_len needs kv_lens");
  if (p.var_q_len && !host.q_lens) return bad("var_q_len needs q_lens");
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t qlen = attention_seq_q_len(p, host.q_lens, b);
    if (qlen < 1 || qlen > p.q_len) return bad(fmt::format("q_lens[{}] = {} outside 1..{}", b, qlen, p.q_len));
    const int64_t len = attention_seq_len(p, host.kv_lens, b);
    const int64_t lo = p.causal ? qlen : 1;
    if (len < lo || len > p.kv_len) return bad(fmt::format("kv_lens[{}] = {} outside {}..{}", b, len, lo, p.kv_len));
    if (!p.paged()) continue;
    const int64_t used = (len + p.page_size - 1) / p.page_size;
    for (int64_t j = 0; j < used; ++j) {
      const int32_t page = host.block_table[b * p.pages_per_seq + j];
      if (page < 0 || page >= p.num_pages)
        return bad(fmt::format("block_table[{}][{}] = {} outside 0..{}", b, j, page, p.num_pages - 1));
    }
  }
  return Status::ok();
}

namespace {

// Row i of sequence b, every head, into o ([heads][head_dim]); padding rows stay zero.
void reference_row(const AttentionParams& p, const AttentionOperands& host, int64_t b, int64_t i, double* o) {
  const int64_t d = p.head_dim;
  const double scale = p.softmax_scale();
  const int64_t len = attention_seq_len(p, host.kv_lens, b);
  const int64_t qlen = attention_seq_q_len(p, host.q_lens, b);
  if (i >= qlen) return;
  const int64_t visible = attention_visible_keys(p, len, qlen, i);
  const int64_t first = attention_first_visible_key(p, len, qlen, i);  // keys [first, visible)
  std::vector<double> q(static_cast<size_t>(d)), score(static_cast<size_t>(visible)), acc(static_cast<size_t>(d));
  for (int64_t h = 0; h < p.heads; ++h) {
    const int64_t g = h / p.group();
    const int64_t qrow = attention_q_row(p, b, i, h);
    for (int64_t e = 0; e < d; ++e) q[size_t(e)] = load_as_double(p.dtype, host.q, qrow + e);
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = first; j < visible; ++j) {
      const int64_t krow = attention_kv_row(p, host.block_table, b, g, j);
      double s = 0;
      for (int64_t e = 0; e < d; ++e) s += q[size_t(e)] * load_as_double(p.dtype, host.k, krow + e);
      score[size_t(j)] = attention_softcapped(p, s * scale);
      mx = std::max(mx, score[size_t(j)]);
    }
    double sum = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = first; j < visible; ++j) {
      const double w = std::exp(score[size_t(j)] - mx);
      sum += w;
      const int64_t vrow = attention_kv_row(p, host.block_table, b, g, j);
      for (int64_t e = 0; e < d; ++e) acc[size_t(e)] += w * load_as_double(p.dtype, host.v, vrow + e);
    }
    for (int64_t e = 0; e < d; ++e) o[h * d + e] = acc[size_t(e)] / sum;
  }
}

}  // namespace

std::vector<double> attention_reference_f64(const AttentionParams& p, const AttentionOperands& host) {
  std::vector<int64_t> rows(size_t(p.batch * p.q_len));
  for (size_t r = 0; r < rows.size(); ++r) rows[r] = int64_t(r);
  return attention_reference_rows_f64(p, host, rows);
}

std::vector<double> attention_reference_rows_f64(const AttentionParams& p, const AttentionOperands& host,
                                                 const std::vector<int64_t>& rows) {
  const int64_t width = p.heads * p.head_dim;
  std::vector<double> out(rows.size() * size_t(width), 0.0);
  for (size_t r = 0; r < rows.size(); ++r)
    reference_row(p, host, rows[r] / p.q_len, rows[r] % p.q_len, out.data() + r * size_t(width));
  return out;
}

double attention_rows_error(const AttentionParams& p, const void* out, const std::vector<int64_t>& rows,
                            const std::vector<double>& ref) {
  const int64_t width = p.heads * p.head_dim;
  for (int64_t r = 0; r < p.batch * p.q_len; ++r)  // every element written, sampled or not
    for (int64_t e = 0; e < width; ++e)
      if (!std::isfinite(load_as_double(p.dtype, out, r * p.o_row_stride + e)))
        return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t e = 0; e < width; ++e) {
      const double v = load_as_double(p.dtype, out, rows[r] * p.o_row_stride + e);
      const double want = ref[r * size_t(width) + size_t(e)];
      num += (v - want) * (v - want);
      den += want * want;
    }
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

double attention_relative_error(const AttentionParams& p, const void* out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  const int64_t width = p.heads * p.head_dim;
  for (int64_t r = 0; r < p.batch * p.q_len; ++r) {
    for (int64_t e = 0; e < width; ++e) {
      const double v = load_as_double(p.dtype, out, r * p.o_row_stride + e);
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      const double want = ref[size_t(r * width + e)];
      num += (v - want) * (v - want);
      den += want * want;
    }
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

double attention_tolerance(const AttentionParams& p) {
  switch (p.dtype) {
    case DType::kBF16: return 1.6e-2;  // 8-bit mantissa: output and probability rounding ~4e-3
    case DType::kF16: return 3e-3;     // 11-bit mantissa
    default: return 2e-5;              // fp32 accumulation over at most a few thousand terms
  }
}

}  // namespace tunableop
