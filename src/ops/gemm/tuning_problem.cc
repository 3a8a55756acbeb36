#include "ops/gemm/tuning_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/checked_size.h"
#include "ops/gemm/reference.h"

namespace tunableop {

namespace {
constexpr size_t kMaxSets = 64;
constexpr size_t kMaxRotatingBytes = size_t(2) << 30;  // never more than 2 GiB of copies
}  // namespace

StatusOr<void*> GemmTuningProblem::alloc(size_t bytes) {
  auto p = rt_.alloc(std::max<size_t>(bytes, 64));
  if (!p.is_ok()) return p.status();
  allocations_.push_back(*p);
  bytes_ += bytes;
  return *p;
}

GemmTuningProblem::~GemmTuningProblem() {
  if (rt_.synchronize) (void)rt_.synchronize(stream_);
  timer_.reset();
  for (void* p : allocations_) rt_.free(p);
}

StatusOr<std::unique_ptr<GemmTuningProblem>> GemmTuningProblem::create(const GemmParams& params,
                                                                       const GemmOperands& src,
                                                                       std::vector<GemmCandidate> candidates,
                                                                       const DeviceRuntime& rt,
                                                                       const TuningPolicy& policy, Logger& log) {
  if (candidates.empty() || candidates.front().name != "Default")
    return Status::internal("GEMM candidates must start with Default");
  std::unique_ptr<GemmTuningProblem> pr(new GemmTuningProblem(params, std::move(candidates), rt, src.stream));
  const GemmParams& p = pr->p_;
  const size_t es = dtype_size(p.dtype);
  // One set of copies plus, on the CPU, the host copies for the numerics check: refused before
  // any allocation when this machine cannot hold them (validate() keeps each product in range).
  TUNABLEOP_RETURN_IF_ERROR(p.with_defaults().validate());
  const CheckedInt set_total = (CheckedInt(p.a_span()) + p.b_span() + p.c_span()) * int64_t(es);
  if (rt.kind == DeviceKind::kCpu) {
    TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(set_total * 2, "tuning " + gemm_params_signature(p)));
  }
  const size_t a_bytes = size_t(p.a_span()) * es, b_bytes = size_t(p.b_span()) * es, c_bytes = size_t(p.c_span()) * es;
  const size_t set_bytes = a_bytes + b_bytes + c_bytes;

  // Enough copies that a full rotation streams more than the last-level cache, so no timed run
  // finds its inputs warm (a model's weights are never in cache at decode time).
  size_t sets = 1;
  if (policy.rotating_buffer_mib != 0) {
    size_t target = policy.rotating_buffer_mib > 0 ? size_t(policy.rotating_buffer_mib) << 20
                                                   : rt.last_level_cache_bytes() + set_bytes;
    target = std::min(target, kMaxRotatingBytes);
    sets = std::clamp<size_t>((target + set_bytes - 1) / std::max<size_t>(set_bytes, 1), 1, kMaxSets);
  }
  for (size_t s = 0; s < sets; ++s) {
    Set set{};
    for (auto [ptr, bytes] : {std::pair{&set.a, a_bytes}, {&set.b, b_bytes}, {&set.c, c_bytes}}) {
      auto m = pr->alloc(bytes);
      if (!m.is_ok())
        return Status(m.status().code(), fmt::format("tuning needs {} MiB of rotating copies: {}",
                                                     (sets * set_bytes) >> 20, m.status().message()));
      *ptr = *m;
    }
    const void* from_a = s == 0 ? src.a : pr->sets_[0].a;
    const void* from_b = s == 0 ? src.b : pr->sets_[0].b;
    using C = DeviceRuntime::Copy;
    TUNABLEOP_RETURN_IF_ERROR(rt.copy(set.a, from_a, a_bytes, C::kDeviceToDevice, src.stream));
    TUNABLEOP_RETURN_IF_ERROR(rt.copy(set.b, from_b, b_bytes, C::kDeviceToDevice, src.stream));
    if (p.beta != 0.0) TUNABLEOP_RETURN_IF_ERROR(rt.copy(set.c, src.c, c_bytes, C::kDeviceToDevice, src.stream));
    pr->sets_.push_back(set);
  }
  if (p.beta != 0.0) {
    auto m = pr->alloc(c_bytes);
    if (!m.is_ok()) return m.status();
    pr->c_pristine_ = *m;
    TUNABLEOP_RETURN_IF_ERROR(
        rt.copy(pr->c_pristine_, src.c, c_bytes, DeviceRuntime::Copy::kDeviceToDevice, src.stream));
  }
  for (const auto& c : pr->cands_)
    if (c.workspace_bytes) pr->workspace_bytes_ = std::max(pr->workspace_bytes_, c.workspace_bytes(p));
  if (pr->workspace_bytes_) {
    auto m = pr->alloc(pr->workspace_bytes_);
    if (!m.is_ok()) return m.status();
    pr->workspace_ = *m;
  }
  if (policy.numerical_check && rt.kind == DeviceKind::kCpu) {
    // Host copies of the inputs for the fp64 check (on the CPU these are plain memcpys).
    pr->host_a_.resize(a_bytes);
    pr->host_b_.resize(b_bytes);
    std::memcpy(pr->host_a_.data(), pr->sets_[0].a, a_bytes);
    std::memcpy(pr->host_b_.data(), pr->sets_[0].b, b_bytes);
    if (p.beta != 0.0) {
      pr->host_c0_.resize(c_bytes);
      std::memcpy(pr->host_c0_.data(), pr->c_pristine_, c_bytes);
    }
  }
  TUNABLEOP_RETURN_IF_ERROR(rt.synchronize(src.stream));
  pr->timer_ = rt.make_timer(src.stream);
  log.log(2, fmt::format("├──tuning memory: {} rotating copies of {:.3g} MiB ({:.3g} MiB in all)", sets,
                         double(set_bytes) / (1 << 20), double(pr->bytes_) / (1 << 20)));
  return pr;
}

Status GemmTuningProblem::run(size_t i, size_t rotation) {
  const Set& s = sets_[rotation % sets_.size()];
  GemmOperands ops{s.a, s.b, s.c, stream_, workspace_, workspace_bytes_};
  return cands_[i].run(p_, ops);
}

Status GemmTuningProblem::restore_c0() {
  const size_t c_bytes = size_t(p_.c_span()) * dtype_size(p_.dtype);
  using C = DeviceRuntime::Copy;
  if (p_.beta != 0.0) return rt_.copy(sets_[0].c, c_pristine_, c_bytes, C::kDeviceToDevice, stream_);
  // beta == 0: poison C with NaN (all-ones bytes are NaN in every dtype) so that an element a
  // candidate forgets to write fails the check. On the device itself where the runtime can: a
  // host buffer of a 1 GB output cost half a second per checked candidate.
  if (rt_.fill_bytes) return rt_.fill_bytes(sets_[0].c, 0xff, c_bytes, stream_);
  std::vector<uint8_t> poison(c_bytes, 0xff);
  return rt_.copy(sets_[0].c, poison.data(), c_bytes, C::kHostToDevice, stream_);
}

Status GemmTuningProblem::fetch_c(std::vector<uint8_t>& host) {
  host.resize(size_t(p_.c_span()) * dtype_size(p_.dtype));
  TUNABLEOP_RETURN_IF_ERROR(
      rt_.copy(host.data(), sets_[0].c, host.size(), DeviceRuntime::Copy::kDeviceToHost, stream_));
  return rt_.synchronize(stream_);
}

Status GemmTuningProblem::check_numerics(size_t i) {
  TUNABLEOP_RETURN_IF_ERROR(restore_c0());
  TUNABLEOP_RETURN_IF_ERROR(run(i, 0));
  std::vector<uint8_t> c;
  TUNABLEOP_RETURN_IF_ERROR(fetch_c(c));
  double tol = gemm_tolerance(p_), err = 0;
  if (rt_.kind == DeviceKind::kCpu) {
    err = freivalds_error(p_, host_a_.data(), host_b_.data(), host_c0_.empty() ? nullptr : host_c0_.data(), c.data());
  } else {
    if (i == 0) {  // Default's output is the reference on devices.
      ref_.resize(size_t(p_.c_span()));
      for (int64_t e = 0; e < p_.c_span(); ++e) ref_[size_t(e)] = load_as_double(p_.dtype, c.data(), e);
    }
    err = relative_error(p_, c.data(), ref_);
    tol *= 2;  // both sides carry rounding error
  }
  if (!(err <= tol)) return Status::numerics(fmt::format("relative error {:.3g} > tolerance {:.3g}", err, tol));
  return Status::ok();
}

}  // namespace tunableop
