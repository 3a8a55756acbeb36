#include "ops/gemm_and_bias/tuning_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/checked_size.h"
#include "ops/gemm/reference.h"
#include "ops/gemm_and_bias/reference.h"

namespace tunableop {

namespace {
constexpr size_t kMaxSets = 64;
constexpr size_t kMaxRotatingBytes = size_t(2) << 30;
}  // namespace

StatusOr<void*> GemmAndBiasTuningProblem::alloc(size_t bytes) {
  auto p = rt_.alloc(std::max<size_t>(bytes, 64));
  if (!p.is_ok()) return p.status();
  allocations_.push_back(*p);
  return *p;
}

GemmAndBiasTuningProblem::~GemmAndBiasTuningProblem() {
  if (rt_.synchronize) (void)rt_.synchronize(stream_);
  timer_.reset();
  for (void* p : allocations_) rt_.free(p);
}

StatusOr<std::unique_ptr<GemmAndBiasTuningProblem>> GemmAndBiasTuningProblem::create(
    const GemmAndBiasParams& params, const GemmAndBiasOperands& src, std::vector<GemmAndBiasCandidate> candidates,
    const DeviceRuntime& rt, const TuningPolicy& policy, Logger& log) {
  if (candidates.empty() || candidates.front().name != "Default")
    return Status::internal("GemmAndBias candidates must start with Default");
  std::unique_ptr<GemmAndBiasTuningProblem> pr(
      new GemmAndBiasTuningProblem(params, std::move(candidates), rt, src.stream));
  const GemmParams& g = pr->p_.gemm;
  const size_t es = dtype_size(g.dtype);
  // As GEMM: sizes in range (validate) and, on the CPU, within this machine's memory.
  TUNABLEOP_RETURN_IF_ERROR(pr->p_.with_defaults().validate());
  if (rt.kind == DeviceKind::kCpu) {
    const CheckedInt set_total = (CheckedInt(g.a_span()) + g.b_span() + g.m + g.c_span()) * int64_t(es);
    TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(set_total * 2, "tuning " + gemm_and_bias_params_signature(pr->p_)));
  }
  const size_t a_bytes = size_t(g.a_span()) * es, b_bytes = size_t(g.b_span()) * es;
  const size_t bias_bytes = size_t(g.m) * es, c_bytes = size_t(g.c_span()) * es;
  const size_t set_bytes = a_bytes + b_bytes + bias_bytes + c_bytes;

  // As GEMM: enough copies that a rotation streams more than the last-level cache.
  size_t sets = 1;
  if (policy.rotating_buffer_mib != 0) {
    size_t target = policy.rotating_buffer_mib > 0 ? size_t(policy.rotating_buffer_mib) << 20
                                                   : rt.last_level_cache_bytes() + set_bytes;
    target = std::min(target, kMaxRotatingBytes);
    sets = std::clamp<size_t>((target + set_bytes - 1) / std::max<size_t>(set_bytes, 1), 1, kMaxSets);
  }
  using C = DeviceRuntime::Copy;
  for (size_t s = 0; s < sets; ++s) {
    Set set{};
    for (auto [ptr, bytes] :
         {std::pair{&set.a, a_bytes}, {&set.b, b_bytes}, {&set.bias, bias_bytes}, {&set.c, c_bytes}}) {
      auto m = pr->alloc(bytes);
      if (!m.is_ok())
        return Status(m.status().code(), fmt::format("tuning needs {} MiB of rotating copies: {}",
                                                     (sets * set_bytes) >> 20, m.status().message()));
      *ptr = *m;
    }
    const Set* first = s == 0 ? nullptr : &pr->sets_[0];
    TUNABLEOP_RETURN_IF_ERROR(rt.copy(set.a, first ? first->a : src.a, a_bytes, C::kDeviceToDevice, src.stream));
    TUNABLEOP_RETURN_IF_ERROR(rt.copy(set.b, first ? first->b : src.b, b_bytes, C::kDeviceToDevice, src.stream));
    TUNABLEOP_RETURN_IF_ERROR(
        rt.copy(set.bias, first ? first->bias : src.bias, bias_bytes, C::kDeviceToDevice, src.stream));
    pr->sets_.push_back(set);
  }
  for (const auto& c : pr->cands_)
    if (c.workspace_bytes) pr->workspace_bytes_ = std::max(pr->workspace_bytes_, c.workspace_bytes(pr->p_));
  if (pr->workspace_bytes_) {
    auto m = pr->alloc(pr->workspace_bytes_);
    if (!m.is_ok()) return m.status();
    pr->workspace_ = *m;
  }
  TUNABLEOP_RETURN_IF_ERROR(rt.synchronize(src.stream));
  if (policy.numerical_check && rt.kind == DeviceKind::kCpu) {
    // On the CPU the copies are host memory: the reference reads set 0 directly.
    if (g.m * g.n * std::max<int64_t>(g.k, 1) <= kFullReferenceMacs || g.n <= kSampledColumns) {
      pr->cols_.resize(size_t(g.n));
      std::iota(pr->cols_.begin(), pr->cols_.end(), int64_t(0));
    } else {
      for (int64_t c = 0; c < kSampledColumns; ++c) pr->cols_.push_back(c * (g.n - 1) / (kSampledColumns - 1));
    }
    const Set& s0 = pr->sets_[0];
    pr->ref_ = gemm_and_bias_columns_f64(pr->p_, s0.a, s0.b, s0.bias, pr->cols_);
  }
  pr->timer_ = rt.make_timer(src.stream);
  log.log(2, fmt::format("├──tuning memory: {} rotating copies of {:.3g} MiB", sets, double(set_bytes) / (1 << 20)));
  return pr;
}

Status GemmAndBiasTuningProblem::run(size_t i, size_t rotation) {
  const Set& s = sets_[rotation % sets_.size()];
  GemmAndBiasOperands ops{s.a, s.b, s.bias, s.c, stream_, workspace_, workspace_bytes_};
  return cands_[i].run(p_, ops);
}

Status GemmAndBiasTuningProblem::check_numerics(size_t i) {
  const GemmParams& g = p_.gemm;
  const size_t c_bytes = size_t(g.c_span()) * dtype_size(g.dtype);
  using C = DeviceRuntime::Copy;
  // Poison C with NaN (all-ones bytes are NaN in every dtype): an element a candidate forgets
  // to write fails the check.
  std::vector<uint8_t> c(c_bytes, 0xff);
  TUNABLEOP_RETURN_IF_ERROR(rt_.copy(sets_[0].c, c.data(), c_bytes, C::kHostToDevice, stream_));
  TUNABLEOP_RETURN_IF_ERROR(run(i, 0));
  TUNABLEOP_RETURN_IF_ERROR(rt_.copy(c.data(), sets_[0].c, c_bytes, C::kDeviceToHost, stream_));
  TUNABLEOP_RETURN_IF_ERROR(rt_.synchronize(stream_));
  double tol = gemm_and_bias_tolerance(p_), err = 0;
  if (rt_.kind == DeviceKind::kCpu) {
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t r = 0; r < g.m; ++r)
        if (!std::isfinite(load_as_double(g.dtype, c.data(), r + j * g.ldc)))
          return Status::numerics(fmt::format("C({}, {}) is not finite (not written?)", r, j));
    err = gemm_and_bias_columns_error(p_, c.data(), cols_, ref_);
  } else {
    if (i == 0) {  // Default's output is the reference on devices.
      ref_.resize(size_t(g.c_span()));
      for (int64_t e = 0; e < g.c_span(); ++e) ref_[size_t(e)] = load_as_double(g.dtype, c.data(), e);
    }
    err = relative_error(g, c.data(), ref_);
    tol *= 2;  // both sides carry rounding error
  }
  if (!(err <= tol)) return Status::numerics(fmt::format("relative error {:.3g} > tolerance {:.3g}", err, tol));
  return Status::ok();
}

}  // namespace tunableop
