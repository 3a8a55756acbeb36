#include "ops/framework/tuning_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include "ops/framework/elements.h"
#include "tunableop/checked_size.h"

namespace tunableop::ops {

using Role = BufferSpec::Role;
using Copy = DeviceRuntime::Copy;

StatusOr<void*> BufferedTuningProblem::alloc(size_t bytes) {
  auto p = rt_.alloc(std::max<size_t>(bytes, 64));
  if (!p.is_ok()) return p.status();
  allocations_.push_back(*p);
  bytes_ += bytes;
  return *p;
}

BufferedTuningProblem::~BufferedTuningProblem() {
  if (rt_.synchronize) (void)rt_.synchronize(stream_);
  timer_.reset();
  for (void* p : allocations_) rt_.free(p);
}

namespace {

// True when any of n values has all exponent bits set (NaN or Inf). No early exit, so the loop
// vectorizes: a scan of a 4 GiB operand costs a fraction of copying it.
template <class Bits>
bool any_exponent_all_ones(const void* data, int64_t n, Bits exponent) {
  const Bits* v = static_cast<const Bits*>(data);
  bool found = false;
  for (int64_t i = 0; i < n; ++i) found |= (v[i] & exponent) == exponent;
  return found;
}

// True when a host buffer of numbers holds NaN or Inf anywhere (gaps included).
bool has_non_finite(DType dtype, const void* data, int64_t elements) {
  switch (dtype) {
    case DType::kF32: return any_exponent_all_ones<uint32_t>(data, elements, 0x7f800000u);
    case DType::kF64: return any_exponent_all_ones<uint64_t>(data, elements, 0x7ff0000000000000ull);
    case DType::kBF16: return any_exponent_all_ones<uint16_t>(data, elements, uint16_t(0x7f80));
    case DType::kF16: return any_exponent_all_ones<uint16_t>(data, elements, uint16_t(0x7c00));
    // e4m3fn has no infinity; its NaN is the one pattern with every exponent and mantissa bit set.
    case DType::kF8E4M3: return any_exponent_all_ones<uint8_t>(data, elements, uint8_t(0x7f));
    case DType::kF8E5M2: return any_exponent_all_ones<uint8_t>(data, elements, uint8_t(0x7c));
  }
  return false;
}

}  // namespace

Status BufferedTuningProblem::setup(Description d, const std::vector<const void*>& sources, const TuningPolicy& policy,
                                    Logger& log) {
  d_ = std::move(d);
  const auto& bufs = d_.buffers;
  if (sources.size() != bufs.size()) return Status::internal("operand sources do not match the buffer description");
  const std::string what = "tuning " + op_signature() + "(" + params_signature() + ")";
  CheckedInt set_total = 0;
  for (const auto& b : bufs) set_total += CheckedInt(b.elements) * int64_t(dtype_size(b.dtype));
  if (!set_total.ok()) return Status::invalid_argument(what + ": the operands' sizes overflow");
  const bool cpu = rt_.kind == DeviceKind::kCpu;
  size_t set_bytes = 0;
  for (const auto& b : bufs) set_bytes += b.bytes();

  // What tuning needs besides the rotating sets: the pristine input-outputs, the workspace, the
  // reference output on a device. On the CPU the numerics check reads the caller's buffers (never
  // touched: candidates run on the copies), except for an input holding NaN or Inf: a program's
  // first call may carry them, and every candidate, Default too, would fail the check. Its copies
  // get random numbers instead (as offline tuning uses) and a host copy of its own.
  std::vector<bool> randomize(bufs.size(), false);
  size_t fixed = d_.workspace_bytes;
  for (size_t b = 0; b < bufs.size(); ++b) {
    if (bufs[b].role == Role::kInputOutput) fixed += bufs[b].bytes();
    if (cpu && d_.numbers_only && bufs[b].role != Role::kOutput && sources[b] != nullptr &&
        has_non_finite(bufs[b].dtype, sources[b], bufs[b].elements)) {
      randomize[b] = true;
      fixed += bufs[b].bytes();
    }
  }
  if (!cpu && rt_.relative_error) fixed += bufs[d_.output.buffer].bytes();

  // Enough copies that a full rotation streams more than the last-level cache, so no timed run
  // finds its inputs warm (a model's weights are never in cache at decode time)...
  size_t sets = 1;
  if (policy.rotating_buffer_mib != 0) {
    size_t target = policy.rotating_buffer_mib > 0 ? size_t(policy.rotating_buffer_mib) << 20
                                                   : rt_.last_level_cache_bytes() + set_bytes;
    target = std::min(target, kMaxRotatingBytes);
    sets = std::clamp<size_t>((target + set_bytes - 1) / std::max<size_t>(set_bytes, 1), 1, kMaxSets);
  }
  // ...but never more than a share of the memory free now (MemAvailable and the cgroup's room on
  // the host, cudaMemGetInfo on a GPU): fewer copies when that is all there is, and no tuning at
  // all when one set does not fit. A program that fits natively must not be OOM-killed, or
  // stalled by allocations that fail, because it is being tuned.
  const uint64_t free = rt_.free_memory_bytes ? rt_.free_memory_bytes() : UINT64_MAX;
  const uint64_t budget = free == UINT64_MAX ? free : free / 4 * 3;
  if (uint64_t(fixed) + set_bytes > budget)
    return Status::resource_exhausted(fmt::format(
        "{} needs {} (one copy of its operands and what the check keeps), more than the {} it may use of the {} "
        "free on {} now",
        what, format_bytes(uint64_t(fixed) + set_bytes), format_bytes(budget), format_bytes(free),
        cpu ? "the host" : "the device"));
  const size_t wanted = sets;
  sets = std::min<uint64_t>(sets, (budget - fixed) / std::max<size_t>(set_bytes, 1));
  if (sets < wanted)
    log.log(2, fmt::format("├──tuning memory: {} rotating copies instead of {} ({} free on {})", sets, wanted,
                           format_bytes(free), cpu ? "the host" : "the device"));

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (size_t s = 0; s < sets; ++s) {
    std::vector<void*> set(bufs.size());
    for (size_t b = 0; b < bufs.size(); ++b) {
      auto m = alloc(bufs[b].bytes());
      if (!m.is_ok())
        return Status(m.status().code(), fmt::format("tuning needs {} MiB of rotating copies: {}",
                                                     (sets * set_bytes) >> 20, m.status().message()));
      set[b] = *m;
      if (bufs[b].role == Role::kOutput) continue;
      if (randomize[b] && s == 0) {
        for (int64_t i = 0; i < bufs[b].elements; ++i) store_from_double(bufs[b].dtype, set[b], i, dist(rng));
        continue;
      }
      // Inputs of later sets come from set 0 (already on the device); an input-output buffer
      // starts from the caller's contents in every set.
      const bool from_caller = s == 0 || (bufs[b].role == Role::kInputOutput && !randomize[b]);
      const void* from = from_caller ? sources[b] : sets_[0][b];
      TUNABLEOP_RETURN_IF_ERROR(rt_.copy(set[b], from, bufs[b].bytes(), Copy::kDeviceToDevice, stream_));
    }
    sets_.push_back(std::move(set));
  }
  pristine_.assign(bufs.size(), nullptr);
  for (size_t b = 0; b < bufs.size(); ++b) {
    if (bufs[b].role != Role::kInputOutput) continue;
    auto m = alloc(bufs[b].bytes());
    if (!m.is_ok()) return m.status();
    pristine_[b] = *m;
    const void* from = randomize[b] ? sets_[0][b] : sources[b];
    TUNABLEOP_RETURN_IF_ERROR(rt_.copy(pristine_[b], from, bufs[b].bytes(), Copy::kDeviceToDevice, stream_));
  }
  if (d_.workspace_bytes) {
    auto m = alloc(d_.workspace_bytes);
    if (!m.is_ok()) return m.status();
    workspace_ = *m;
  }
  if (policy.numerical_check && cpu) {
    // The fp64 check reads pristine inputs: the caller's own buffers, which no candidate sees, or
    // a host copy of the random numbers that replaced non-finite ones.
    host_.resize(bufs.size());
    std::vector<const void*> host_ptrs(bufs.size(), nullptr);
    for (size_t b = 0; b < bufs.size(); ++b) {
      if (bufs[b].role == Role::kOutput) continue;
      host_ptrs[b] = sources[b];
      if (!randomize[b]) continue;
      host_[b].resize(bufs[b].bytes());
      if (!host_[b].empty()) std::memcpy(host_[b].data(), sets_[0][b], host_[b].size());
      host_ptrs[b] = host_[b].data();
      bytes_ += host_[b].size();
    }
    host_check_ = d_.host_check(host_ptrs);
  }
  if (std::find(randomize.begin(), randomize.end(), true) != randomize.end())
    log.log(2, "├──the call's inputs hold NaN or Inf: tuning on random numbers of the same shapes");
  TUNABLEOP_RETURN_IF_ERROR(rt_.synchronize(stream_));
  timer_ = rt_.make_timer(stream_);
  log.log(2, fmt::format("├──tuning memory: {} rotating copies of {:.3g} MiB ({:.3g} MiB in all)", sets,
                         double(set_bytes) / (1 << 20), double(bytes_) / (1 << 20)));
  return Status::ok();
}

Status BufferedTuningProblem::restore_outputs() {
  for (size_t b = 0; b < d_.buffers.size(); ++b) {
    const BufferSpec& spec = d_.buffers[b];
    if (spec.role == Role::kInput) continue;
    if (spec.role == Role::kInputOutput) {
      TUNABLEOP_RETURN_IF_ERROR(rt_.copy(sets_[0][b], pristine_[b], spec.bytes(), Copy::kDeviceToDevice, stream_));
      continue;
    }
    // Poison with NaN (all-ones bytes are NaN in every dtype) so that an element a candidate
    // forgets to write fails the check. On the device itself where the runtime can: a host
    // buffer of a 1 GB output cost half a second per checked candidate.
    if (rt_.fill_bytes) {
      TUNABLEOP_RETURN_IF_ERROR(rt_.fill_bytes(sets_[0][b], 0xff, spec.bytes(), stream_));
    } else {
      std::vector<uint8_t> poison(spec.bytes(), 0xff);
      TUNABLEOP_RETURN_IF_ERROR(rt_.copy(sets_[0][b], poison.data(), spec.bytes(), Copy::kHostToDevice, stream_));
    }
  }
  return Status::ok();
}

Status BufferedTuningProblem::check_numerics(size_t i) {
  TUNABLEOP_RETURN_IF_ERROR(restore_outputs());
  TUNABLEOP_RETURN_IF_ERROR(run_on_set(i, 0));
  TUNABLEOP_RETURN_IF_ERROR(rt_.synchronize(stream_));
  const OutputLayout& o = d_.output;
  void* out = sets_[0][o.buffer];
  double tol = d_.tolerance, err = 0;
  if (rt_.kind == DeviceKind::kCpu) {
    if (!host_check_) return Status::internal("numerics check requested but not prepared");
    err = host_check_(out);  // host memory on the CPU
  } else {
    // Default's output is the reference on devices; both sides carry rounding error.
    tol *= 2;
    const size_t bytes = d_.buffers[o.buffer].bytes();
    if (rt_.relative_error) {
      if (i == 0) {
        if (!ref_device_) {
          auto m = alloc(bytes);
          if (!m.is_ok()) return m.status();
          ref_device_ = *m;
        }
        TUNABLEOP_RETURN_IF_ERROR(rt_.copy(ref_device_, out, bytes, Copy::kDeviceToDevice, stream_));
      }
      if (!ref_device_) return Status::internal("numerics check before Default's");
      auto e = rt_.relative_error(o.dtype, out, ref_device_, o.m, o.n, o.ld, o.batch, o.stride, stream_);
      if (!e.is_ok()) return e.status();
      err = *e;
    } else {
      std::vector<uint8_t> host(bytes);
      TUNABLEOP_RETURN_IF_ERROR(rt_.copy(host.data(), out, bytes, Copy::kDeviceToHost, stream_));
      TUNABLEOP_RETURN_IF_ERROR(rt_.synchronize(stream_));
      if (i == 0) ref_ = layout_to_double(o, host.data());
      if (ref_.empty() && o.m * o.n * o.batch > 0) return Status::internal("numerics check before Default's");
      err = layout_error(o, host.data(), ref_);
    }
  }
  if (!(err <= tol)) return Status::numerics(fmt::format("relative error {:.3g} > tolerance {:.3g}", err, tol));
  return Status::ok();
}

}  // namespace tunableop::ops
