#include "backends/cuda/scaled_gemm/candidates.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/common/lt_plan.h"
#include "backends/cuda/common/lt_search.h"
#include "backends/cuda/scaled_gemm/fp8_kernels.h"
#include "backends/cuda/scaled_gemm/lt_fp8.h"

namespace tunableop::cuda {

namespace {

Fp8Launch launch_args(const ScaledGemmParams& p, const ScaledGemmOperands& o) {
  Fp8Launch l;
  l.a = o.a, l.b = o.b, l.scale_a = o.scale_a, l.scale_b = o.scale_b, l.c = o.c;
  l.bias = p.has_bias() ? o.bias : nullptr;
  l.m = p.m, l.n = p.n, l.k = p.k, l.lda = p.lda, l.ldb = p.ldb, l.ldc = p.ldc;
  l.transa = p.transa == 'T', l.transb = p.transb == 'T';
  l.a_e5m2 = p.a_dtype == DType::kF8E5M2, l.b_e5m2 = p.b_dtype == DType::kF8E5M2;
  l.rowwise = p.scale_mode == ScaleMode::kRowwise;
  l.out_type = int(p.out_dtype);
  l.bias_type = int(p.bias_dtype.value_or(p.out_dtype));
  return l;
}

Status run_simt(const ScaledGemmParams& p, const ScaledGemmOperands& o) {
  return cuda_status(fp8_simt_launch(launch_args(p, o), static_cast<cudaStream_t>(o.stream)), "fp8 simt kernel");
}

// Default: as torch._scaled_mm, the heuristic's first answer; our simt kernel where there is none.
Status run_default(const ScaledGemmParams& p, const ScaledGemmOperands& o) {
  auto plan = kept_fp8_plan(p, false);
  if (!plan.is_ok()) return plan.status().code() == StatusCode::kUnsupported ? run_simt(p, o) : plan.status();
  auto choice = fp8_heuristic_first(**plan, o);
  if (!choice.is_ok()) return choice.status().code() == StatusCode::kUnsupported ? run_simt(p, o) : choice.status();
  return (*plan)->run(choice->algo, choice->workspace, o);
}

// ---- cuBLASLt families ----

const char* prefix_of(bool fast) { return fast ? kFp8LtFastPrefix : kFp8LtPrefix; }

std::string fp8_lt_name(bool fast, const LtConfig& c) {
  return prefix_of(fast) + lt_name(c).substr(std::string(kLtPrefix).size());
}

ScaledGemmCandidate make_lt_candidate(std::shared_ptr<Fp8LtPlan> plan, const LtConfig& cfg,
                                      const cublasLtMatmulAlgo_t& algo, size_t workspace) {
  ScaledGemmCandidate c;
  c.name = fp8_lt_name(plan->fast_accum(), cfg);
  c.info = lt_info(cfg, plan->fast_accum() ? "fp8 fast accumulation" : "fp8");
  c.device = DeviceKind::kCuda;
  auto applies = [plan](const ScaledGemmParams& p) -> Status {
    if (!plan->matches(p)) return Status::unsupported("cuBLASLt algorithm was configured for another problem");
    return Status::ok();
  };
  c.supports = applies;
  c.workspace_bytes = [workspace](const ScaledGemmParams&) { return workspace; };
  const LtAlignment align = algo_alignment(algo);
  c.run = [plan, algo, align, workspace, applies](const ScaledGemmParams& p, const ScaledGemmOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(applies(p));
    // C's pointer is A's (never read): it must meet C's alignment too.
    if (lt_alignment_of(o.a) < std::max(align.a, align.c) || lt_alignment_of(o.b) < align.b ||
        lt_alignment_of(o.c) < align.c || (p.has_bias() && lt_alignment_of(o.bias) < 16))
      return Status::unsupported(fmt::format(
          "pointers not aligned as the algorithm needs (A {}, B {}, C {}, bias 16 bytes)", align.a, align.b, align.c));
    return plan->run(algo, workspace, o);
  };
  return c;
}

std::vector<ScaledGemmCandidate> expand_lt(bool fast, const ScaledGemmParams& p, int effort) {
  std::vector<ScaledGemmCandidate> out;
  auto h = current_handles();
  auto plan = Fp8LtPlan::create(p, fast);
  if (!h.is_ok() || !plan.is_ok()) return out;
  const LtProblem& q = (*plan)->problem();
  std::vector<LtConfig> configs;
  lt_heuristic_configs(h->lt, q, effort <= 0 ? kFp8LtHeuristicRequestEffort0 : kFp8LtHeuristicRequest, configs);
  if (effort >= 1) lt_per_id_configs(h->lt, q, configs);
  if (effort >= 2) lt_exhaustive_configs(h->lt, q, configs.size() + kFp8LtExhaustiveMaxConfigs, configs);
  std::set<std::string> seen;
  for (const LtConfig& cfg : configs) {
    if (!seen.insert(fp8_lt_name(fast, cfg)).second) continue;
    // Time exactly what a later run rebuilds from the name, so a stored result means one kernel.
    size_t ws = 0;
    auto algo = lt_make_algo(h->lt, q, cfg, &ws);
    if (algo.is_ok()) out.push_back(make_lt_candidate(*plan, cfg, *algo, ws));
  }
  return out;
}

StatusOr<ScaledGemmCandidate> resolve_lt(bool fast, const ScaledGemmParams& p, const std::string& name) {
  const std::string prefix = prefix_of(fast);
  if (name.rfind(prefix, 0) != 0) return Status::not_found(fmt::format("'{}' is not a {} name", name, prefix));
  auto cfg = parse_lt_name(kLtPrefix + name.substr(prefix.size()));
  if (!cfg.is_ok()) return cfg.status();
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  auto plan = Fp8LtPlan::create(p, fast);
  if (!plan.is_ok()) return plan.status();
  size_t ws = 0;
  auto algo = lt_make_algo(h->lt, (*plan)->problem(), *cfg, &ws);
  if (!algo.is_ok())
    return Status::unsupported(fmt::format("{} no longer validates here: {}", name, algo.status().message()));
  return make_lt_candidate(*plan, *cfg, *algo, ws);
}

// ---- our kernels ----

struct GemvShape {
  int rows, k_split;
};
// Effort-0 shapes first: many rows and moderate k, few rows and long k, short k.
constexpr GemvShape kGemvShapes[] = {{2, 2}, {1, 4}, {4, 1}, {1, 1}, {1, 2}, {2, 1}, {2, 4}, {4, 2}, {4, 4}};
constexpr int kGemvEffort0Shapes = 3;

Status gemv_supports(const ScaledGemmParams& p) {
  if (p.transa != 'T' || p.transb != 'N') return Status::unsupported("fp8 gemv: TN only");
  if (p.a_dtype != DType::kF8E4M3 || p.b_dtype != DType::kF8E4M3) return Status::unsupported("fp8 gemv: e4m3 only");
  if (p.n > kFp8GemvMaxN) return Status::unsupported(fmt::format("fp8 gemv: n must be <= {}", kFp8GemvMaxN));
  if (p.lda % 16 || p.ldb % 16) return Status::unsupported("fp8 gemv: lda and ldb must be multiples of 16");
  return Status::ok();
}

ScaledGemmCandidate gemv_candidate(const GemvShape& s, int min_effort) {
  ScaledGemmCandidate c;
  c.name = fmt::format("Fp8_Gemv_r{}_sk{}", s.rows, s.k_split);
  c.device = DeviceKind::kCuda;
  c.min_effort = min_effort;
  c.supports = gemv_supports;
  c.run = [s](const ScaledGemmParams& p, const ScaledGemmOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(gemv_supports(p));
    if (!aligned16(o.a) || !aligned16(o.b)) return Status::unsupported("fp8 gemv: A and B must be 16-byte aligned");
    Fp8Launch l = launch_args(p, o);
    l.rows = s.rows, l.k_split = s.k_split;
    return cuda_status(fp8_gemv_launch(l, static_cast<cudaStream_t>(o.stream)), "fp8 gemv kernel");
  };
  c.info = {"tunableop", "fp8 gemv", {}};
  c.info.add("rows", std::to_string(s.rows)).add("k_split", std::to_string(s.k_split));
  return c;
}

// ---- split m, padded C ----

// An m that is not a multiple of 64 (vocabulary sizes) and a C whose leading dimension is not
// aligned keep cuBLASLt's FP8 kernels off or on a slow path. Split: the rows up to the last
// multiple of 64 through cuBLASLt, the rest through the simt kernel. Padded C: cuBLASLt's rows
// into a C of aligned leading dimension in the workspace, copied out (part of the timed run).
struct LayoutVariant {
  bool split, pad_c;
  std::string name() const { return std::string("Fp8_") + (split ? "SplitM_" : "") + (pad_c ? "PadC_" : "") + "g64"; }
};
constexpr int64_t kGranule = 64;
constexpr size_t kMaxPaddedBytes = size_t(2) << 30;

int64_t lt_rows(const LayoutVariant& v, const ScaledGemmParams& p) { return v.split ? p.m / kGranule * kGranule : p.m; }
int64_t padded_ld(const LayoutVariant& v, const ScaledGemmParams& p) {
  return (lt_rows(v, p) + kGranule - 1) / kGranule * kGranule;
}
size_t padded_c_bytes(const LayoutVariant& v, const ScaledGemmParams& p) {
  if (!v.pad_c) return 0;
  const size_t bytes = size_t(padded_ld(v, p)) * size_t(p.n) * dtype_size(p.out_dtype);
  return (bytes + 255) / 256 * 256;
}

Status layout_supports(const LayoutVariant& v, const ScaledGemmParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(lt_fp8_applies(p));
  if (v.split && p.m % kGranule == 0) return Status::unsupported("split-m: m is a multiple of 64");
  if (v.split && p.m < kGranule) return Status::unsupported("split-m: m < 64");
  if (v.pad_c && p.ldc % kGranule == 0) return Status::unsupported("padded C: ldc already aligned");
  if (padded_c_bytes(v, p) > kMaxPaddedBytes) return Status::unsupported("padded C too large");
  return Status::ok();
}

Status run_layout(const LayoutVariant& v, const ScaledGemmParams& p, const ScaledGemmOperands& o) {
  TUNABLEOP_RETURN_IF_ERROR(layout_supports(v, p));
  const int64_t m1 = lt_rows(v, p);
  const size_t out_size = dtype_size(p.out_dtype);
  auto stream = static_cast<cudaStream_t>(o.stream);
  const size_t padded = padded_c_bytes(v, p);
  auto ws = workspace_for(GemmOperands{o.a, o.b, o.c, o.stream, o.workspace, o.workspace_bytes},
                          padded + kLtMaxWorkspaceBytes);
  if (!ws.is_ok()) return ws.status();
  ScaledGemmParams top = p;
  top.m = m1;
  ScaledGemmOperands top_ops = o;
  top_ops.workspace = static_cast<char*>(*ws) + padded;
  top_ops.workspace_bytes = kLtMaxWorkspaceBytes;
  if (v.pad_c) {
    top.ldc = padded_ld(v, p);
    top_ops.c = *ws;
  }
  auto plan = kept_fp8_plan(top, false);
  if (!plan.is_ok()) return plan.status();
  auto choice = fp8_heuristic_first(**plan, top_ops);
  if (!choice.is_ok()) return choice.status();
  TUNABLEOP_RETURN_IF_ERROR((*plan)->run(choice->algo, choice->workspace, top_ops));
  if (v.pad_c)
    TUNABLEOP_CUDA_TRY(cudaMemcpy2DAsync(o.c, size_t(p.ldc) * out_size, *ws, size_t(top.ldc) * out_size,
                                         size_t(m1) * out_size, size_t(p.n), cudaMemcpyDeviceToDevice, stream));
  if (m1 == p.m) return Status::ok();
  ScaledGemmParams rest = p;
  rest.m = p.m - m1;
  ScaledGemmOperands rest_ops = o;
  rest_ops.a = static_cast<const uint8_t*>(o.a) + m1 * p.lda;  // TN: op(A)'s rows are A's columns
  rest_ops.scale_a = o.scale_a + (p.scale_mode == ScaleMode::kRowwise ? m1 : 0);
  if (p.has_bias()) rest_ops.bias = static_cast<const char*>(o.bias) + size_t(m1) * dtype_size(*p.bias_dtype);
  rest_ops.c = static_cast<char*>(o.c) + size_t(m1) * out_size;
  return run_simt(rest, rest_ops);
}

ScaledGemmCandidate layout_candidate(const LayoutVariant& v) {
  ScaledGemmCandidate c;
  c.name = v.name();
  c.device = DeviceKind::kCuda;
  c.supports = [v](const ScaledGemmParams& p) { return layout_supports(v, p); };
  c.run = [v](const ScaledGemmParams& p, const ScaledGemmOperands& o) { return run_layout(v, p, o); };
  c.workspace_bytes = [v](const ScaledGemmParams& p) -> size_t {
    return layout_supports(v, p).is_ok() ? padded_c_bytes(v, p) + kLtMaxWorkspaceBytes : 0;
  };
  c.info = {"cuBLASLt", v.split ? "fp8 split m" : "fp8 padded C", {}};
  c.info.add("pad_c", v.pad_c ? "1" : "0").add("granule", std::to_string(kGranule));
  return c;
}

}  // namespace

ScaledGemmCandidate make_scaled_gemm_default() {
  ScaledGemmCandidate c;
  c.name = "Default";
  c.device = DeviceKind::kCuda;
  c.supports = [](const ScaledGemmParams&) { return Status::ok(); };
  c.workspace_bytes = [](const ScaledGemmParams& p) {
    return lt_fp8_applies(p).is_ok() ? kLtMaxWorkspaceBytes : size_t(0);
  };
  c.run = run_default;
  c.info = {"cuBLASLt", "fp8 heuristic", {}};
  return c;
}

ScaledGemmCandidateFamily make_fp8_lt_family(bool fast_accum) {
  ScaledGemmCandidateFamily f;
  f.prefix = prefix_of(fast_accum);
  f.device = DeviceKind::kCuda;
  f.expand = [fast_accum](const ScaledGemmParams& p, int effort) { return expand_lt(fast_accum, p, effort); };
  f.resolve = [fast_accum](const ScaledGemmParams& p, const std::string& name) {
    return resolve_lt(fast_accum, p, name);
  };
  return f;
}

void register_cuda_scaled_gemm(Registry& r) {
  auto& list = r.list<ScaledGemmCandidate>();
  list.push_back(make_scaled_gemm_default());
  int i = 0;
  for (const GemvShape& s : kGemvShapes) list.push_back(gemv_candidate(s, i++ < kGemvEffort0Shapes ? 0 : 1));
  for (const LayoutVariant& v : {LayoutVariant{true, false}, LayoutVariant{true, true}, LayoutVariant{false, true}})
    list.push_back(layout_candidate(v));
  ScaledGemmCandidate simt;
  simt.name = "Fp8_Simt";
  simt.device = DeviceKind::kCuda;
  simt.min_effort = 1;
  simt.supports = [](const ScaledGemmParams&) { return Status::ok(); };
  simt.run = run_simt;
  simt.info = {"tunableop", "fp8 simt", {}};
  list.push_back(std::move(simt));
  r.list<ScaledGemmCandidateFamily>().push_back(make_fp8_lt_family(false));
  r.list<ScaledGemmCandidateFamily>().push_back(make_fp8_lt_family(true));
}

}  // namespace tunableop::cuda
