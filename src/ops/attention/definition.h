// Attention as the op framework sees it (docs/design.md, "How to add an op"). Buffers: q, k, v,
// out, then the int32 tables block_table, kv_lens and q_lens (empty when the problem has none;
// described as fp32 elements of the same 4 bytes, since they are only ever copied). Random
// operands (offline tuning, benches) get valid tables: pages in a shuffled order, every sequence
// at full length. Numerics on the CPU: the fp64 reference on every query row when the problem
// is small, else on kSampledRows rows spread over the batch, plus a scan that every output
// element was written; on the GPU, Default's output (the math path).
#pragma once

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/attention/reference.h"
#include "ops/framework/definition.h"
#include "ops/framework/problem_key.h"
#include "tunableop/attention.h"

namespace tunableop::ops {

template <>
struct OpDefinition<AttentionOp> {
  static constexpr const char* kName = "Attention";
  static constexpr double kFullReferenceMacs = double(int64_t(1) << 28);
  static constexpr int64_t kSampledRows = 48;
  enum Buffer : size_t { kQ, kK, kV, kOut, kTable, kKvLens, kQLens };

  static AttentionParams normalize(const AttentionParams& p) { return p.with_defaults(); }
  static Status validate(const AttentionParams& p) { return p.validate(); }
  static bool is_empty(const AttentionParams&) { return false; }  // validate() refuses empty shapes
  static Status check_operands(const AttentionParams& p, const AttentionOperands& o) {
    if (!o.q || !o.k || !o.v || !o.out) return Status::invalid_argument("attention: q, k, v and out must be set");
    if (p.paged() && !o.block_table) return Status::invalid_argument("attention: a paged cache needs block_table");
    if (p.var_kv_len && !o.kv_lens) return Status::invalid_argument("attention: var_kv_len needs kv_lens");
    if (p.var_q_len && !o.q_lens) return Status::invalid_argument("attention: var_q_len needs q_lens");
    return Status::ok();
  }
  static std::string op_signature(const AttentionParams& p) { return attention_op_signature(p); }
  static std::string params_signature(const AttentionParams& p) { return attention_params_signature(p); }
  static ProblemKey key(const AttentionParams& p) {
    return {int64_t(p.dtype),
            int64_t(p.causal),
            p.batch,
            p.q_len,
            p.kv_len,
            p.heads,
            p.kv_heads,
            p.head_dim,
            p.q_row_stride,
            p.o_row_stride,
            p.max_seq,
            p.page_size,
            p.pages_per_seq,
            p.num_pages,
            int64_t(p.var_kv_len),
            int64_t(p.var_q_len),
            std::bit_cast<int64_t>(p.scale),
            p.window,
            std::bit_cast<int64_t>(p.softcap)};
  }

  static std::vector<BufferSpec> buffers(const AttentionParams& p) {
    using Role = BufferSpec::Role;
    return {{"q", p.dtype, p.q_span(), Role::kInput},
            {"k", p.dtype, p.kv_span(), Role::kInput},
            {"v", p.dtype, p.kv_span(), Role::kInput},
            {"out", p.dtype, p.o_span(), Role::kOutput},
            {"block_table", DType::kF32, p.block_table_span(), Role::kInput},  // int32 entries
            {"kv_lens", DType::kF32, p.var_kv_len ? p.batch : 0, Role::kInput},
            {"q_lens", DType::kF32, p.var_q_len ? p.batch : 0, Role::kInput}};
  }
  static AttentionOperands bind(const AttentionParams& p, const BoundBuffers& b) {
    AttentionOperands o;
    o.q = b.buffers[kQ], o.k = b.buffers[kK], o.v = b.buffers[kV], o.out = b.buffers[kOut];
    o.block_table = p.paged() ? static_cast<const int32_t*>(b.buffers[kTable]) : nullptr;
    o.kv_lens = p.var_kv_len ? static_cast<const int32_t*>(b.buffers[kKvLens]) : nullptr;
    o.q_lens = p.var_q_len ? static_cast<const int32_t*>(b.buffers[kQLens]) : nullptr;
    o.stream = b.stream, o.workspace = b.workspace, o.workspace_bytes = b.workspace_bytes;
    return o;
  }
  static std::vector<const void*> sources(const AttentionOperands& o) {
    return {o.q, o.k, o.v, o.out, o.block_table, o.kv_lens, o.q_lens};
  }
  static void* stream(const AttentionOperands& o) { return o.stream; }
  // Output rows as a column-major (heads * head_dim) x (batch * q_len) matrix, o_row_stride apart.
  static OutputLayout output(const AttentionParams& p) {
    return {kOut, p.dtype, p.heads * p.head_dim, p.batch * p.q_len, p.o_row_stride, 1, 0};
  }
  static double tolerance(const AttentionParams& p) { return attention_tolerance(p); }
  static HostCheck host_check(const AttentionParams& p, const std::vector<const void*>& host) {
    AttentionOperands o;
    o.q = host[kQ], o.k = host[kK], o.v = host[kV];
    o.block_table = p.paged() ? static_cast<const int32_t*>(host[kTable]) : nullptr;
    o.kv_lens = p.var_kv_len ? static_cast<const int32_t*>(host[kKvLens]) : nullptr;
    o.q_lens = p.var_q_len ? static_cast<const int32_t*>(host[kQLens]) : nullptr;
    std::vector<int64_t> rows;
    const int64_t all = p.batch * p.q_len;
    if (p.flops() <= kFullReferenceMacs || all <= kSampledRows) {
      rows.resize(size_t(all));
      std::iota(rows.begin(), rows.end(), int64_t(0));
    } else {
      for (int64_t r = 0; r < kSampledRows; ++r) rows.push_back(r * (all - 1) / (kSampledRows - 1));
    }
    std::vector<double> ref = attention_reference_rows_f64(p, o, rows);
    return [p, rows = std::move(rows), ref = std::move(ref)](const void* out) {
      return attention_rows_error(p, out, rows, ref);
    };
  }
  // Random operands' tables (OpBuffers::random): pages shuffled through the pool, full lengths.
  // A table the problem does not have is an empty buffer: left alone.
  static bool fill_random(const AttentionParams& p, size_t buffer, void* host, std::mt19937_64& rng) {
    auto* t = static_cast<int32_t*>(host);
    if ((buffer == kTable && !p.paged()) || (buffer == kKvLens && !p.var_kv_len) || (buffer == kQLens && !p.var_q_len))
      return true;
    if (buffer == kTable) {
      std::vector<int32_t> pages(size_t(p.num_pages));
      std::iota(pages.begin(), pages.end(), 0);
      std::shuffle(pages.begin(), pages.end(), rng);
      for (int64_t i = 0; i < p.block_table_span(); ++i) t[i] = pages[size_t(i) % pages.size()];
      return true;
    }
    if (buffer == kKvLens || buffer == kQLens) {
      for (int64_t b = 0; b < p.batch; ++b) t[b] = int32_t(buffer == kKvLens ? p.kv_len : p.q_len);
      return true;
    }
    return false;
  }
};

}  // namespace tunableop::ops
