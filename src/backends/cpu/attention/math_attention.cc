// The math path on the CPU: per (sequence, kv head), the group's query heads stacked as rows,
// S = Q K^T through our blocked GEMM (fp32), a masked row softmax, then O = P V through the same
// GEMM. It materialises the whole score matrix, which is the point: it is the plain
// definition, held against the fused kernel. Also the candidate list of this folder.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention/cpu_attention.h"
#include "backends/cpu/kernels/blocked_gemm.h"
#include "backends/cpu/kernels/driver_common.h"
#include "ops/attention/reference.h"

namespace tunableop::cpu_attention {

Status math_attention(const AttentionParams& params, const AttentionOperands& o, int threads) {
  const AttentionParams p = params.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  TUNABLEOP_RETURN_IF_ERROR(check_attention_operands(p, o));
  const int64_t d = p.head_dim, group = p.group(), rows = p.q_len * group;
  const cpu_kernels::Isa isa = cpu_kernels::best_isa();
  const cpu_kernels::BlockedConfig gemm_cfg{isa, 192, 2048, 384, cpu_kernels::resolve_threads(threads)};
  std::vector<float> q(size_t(rows * d)), k, v, s, out(size_t(rows * d));
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t len = attention_seq_len(p, o.kv_lens, b);
    const int64_t qlen = attention_seq_q_len(p, o.q_lens, b);
    k.resize(size_t(len * d));
    v.resize(size_t(len * d));
    s.resize(size_t(rows * len));
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      for (int64_t r = 0; r < rows; ++r)
        load_attention_row(p.dtype, o.q, attention_q_row(p, b, r / group, g * group + r % group), d, q.data() + r * d);
      // Keys before the first query's window are never read: zeros (their probabilities are 0).
      const int64_t lo = attention_first_visible_key(p, len, qlen, 0);
      std::fill(k.begin(), k.begin() + lo * d, 0.f);
      std::fill(v.begin(), v.begin() + lo * d, 0.f);
      for (int64_t j = lo; j < len; ++j) {
        const int64_t off = attention_kv_row(p, o.block_table, b, g, j);
        load_attention_row(p.dtype, o.k, off, d, k.data() + j * d);
        load_attention_row(p.dtype, o.v, off, d, v.data() + j * d);
      }
      // Row-major S[rows][len] is column-major S^T = K Q^T: "tn", m = len, n = rows, k = d.
      GemmParams sp;
      sp.dtype = DType::kF32, sp.transa = 'T', sp.transb = 'N';
      sp.m = len, sp.n = rows, sp.k = d, sp.lda = d, sp.ldb = d, sp.ldc = len;
      sp.alpha = p.softmax_scale();
      TUNABLEOP_RETURN_IF_ERROR(cpu_kernels::blocked_gemm(sp, GemmOperands{k.data(), q.data(), s.data()}, gemm_cfg));
      const float cap = float(p.softcap);
      for (int64_t r = 0; r < rows; ++r) {
        float* sr = s.data() + r * len;
        const int64_t visible = attention_visible_keys(p, len, qlen, r / group);     // 0: padding row
        const int64_t first = attention_first_visible_key(p, len, qlen, r / group);  // sliding window
        if (cap > 0.f)
          for (int64_t j = first; j < visible; ++j) sr[j] = cap * std::tanh(sr[j] / cap);
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = first; j < visible; ++j) mx = std::max(mx, sr[j]);
        float sum = 0.f;
        for (int64_t j = first; j < visible; ++j) sum += (sr[j] = std::exp(sr[j] - mx));
        const float inv = visible > first ? 1.f / sum : 0.f;
        for (int64_t j = 0; j < len; ++j) sr[j] = j >= first && j < visible ? sr[j] * inv : 0.f;
      }
      // Row-major O[rows][d] is column-major O^T = V^T P^T: "nn", m = d, n = rows, k = len.
      GemmParams op;
      op.dtype = DType::kF32, op.transa = 'N', op.transb = 'N';
      op.m = d, op.n = rows, op.k = len, op.lda = d, op.ldb = len, op.ldc = d;
      TUNABLEOP_RETURN_IF_ERROR(cpu_kernels::blocked_gemm(op, GemmOperands{v.data(), s.data(), out.data()}, gemm_cfg));
      for (int64_t r = 0; r < rows; ++r)
        store_attention_row(p.dtype, o.out, attention_o_row(p, b, r / group, g * group + r % group), d,
                            out.data() + r * d, 1.f);
    }
  }
  return Status::ok();
}

std::vector<AttentionCandidate> cpu_attention_candidates() {
  std::vector<AttentionCandidate> out;
  auto supports = [](const AttentionParams& p) { return p.with_defaults().validate(); };
  AttentionCandidate math;
  math.name = "Default";  // the math path: the op's fallback on the CPU
  math.device = DeviceKind::kCpu;
  math.info = CandidateInfo{"tunableop", "math", {{"gemm", "blocked"}}};
  math.supports = [supports](const AttentionParams& p) {
    // One (sequence, kv head) score matrix at a time, fp32.
    if (double(p.q_len) * double(p.group()) * double(p.kv_len) * 4.0 > double(int64_t(1) << 31))
      return Status::unsupported("score matrix over 2 GiB");
    return supports(p);
  };
  math.run = [](const AttentionParams& p, const AttentionOperands& o) { return math_attention(p, o); };
  out.push_back(math);
  // Query blocks trade K/V conversion (amortised over more rows) against parallelism; key
  // blocks trade the score row's cache footprint against loop overhead.
  const FusedConfig fused[] = {{16, 64, 0}, {4, 128, 0}, {64, 64, 0}, {16, 256, 0}, {1, 256, 0}};
  for (const auto& c : fused) {
    AttentionCandidate cand;
    cand.name = fmt::format("Attn_Cpu_Fused_q{}_k{}", c.query_block, c.key_block);
    cand.device = DeviceKind::kCpu;
    cand.info = CandidateInfo{"tunableop", "fused", {}};
    cand.info.add("query_block", std::to_string(c.query_block)).add("key_block", std::to_string(c.key_block));
    cand.min_effort = out.size() <= 2 ? 0 : 1;
    cand.supports = supports;
    cand.run = [c](const AttentionParams& p, const AttentionOperands& o) { return fused_attention(p, o, c); };
    out.push_back(cand);
  }
  return out;
}

}  // namespace tunableop::cpu_attention

namespace tunableop {

void register_cpu_attention(Registry& r) {
  for (auto& c : cpu_attention::cpu_attention_candidates()) r.list<AttentionCandidate>().push_back(std::move(c));
}

}  // namespace tunableop
