// Size arithmetic on numbers that come from outside (CLI flags, results and untuned files,
// config.json, safetensors headers, API parameters). Every product or sum that sizes a buffer,
// an offset or a byte count goes through CheckedInt, so an overflow becomes an error naming the
// input instead of a wrapped value that a buffer is sized from and a kernel then writes past.
// The limits say what this machine can hold, so a huge but representable size is refused before
// anything is allocated (an allocation that fails part-way is slow, and under ASan it aborts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "tunableop/status.h"

namespace tunableop {

// An int64 that remembers whether any step of its computation overflowed. Operations on an
// overflowed value stay overflowed, so a whole formula is written plainly and checked once:
//   CheckedInt span = (CheckedInt(batch) - 1) * stride + CheckedInt(ld) * (cols - 1) + rows;
//   if (!span.ok()) return Status::invalid_argument("... overflows");
class CheckedInt {
 public:
  constexpr CheckedInt(int64_t v = 0) : v_(v) {}  // NOLINT(implicit): mixes with plain ints
  static constexpr CheckedInt overflow() {
    CheckedInt c;
    c.ok_ = false;
    return c;
  }
  constexpr bool ok() const { return ok_; }
  // Meaningful only when ok(); INT64_MAX otherwise (a saturated value for display and defaults).
  constexpr int64_t value() const { return ok_ ? v_ : std::numeric_limits<int64_t>::max(); }
  constexpr std::optional<int64_t> get() const { return ok_ ? std::optional<int64_t>(v_) : std::nullopt; }

  friend constexpr CheckedInt operator+(CheckedInt a, CheckedInt b) {
    int64_t r = 0;
    if (!a.ok_ || !b.ok_ || __builtin_add_overflow(a.v_, b.v_, &r)) return overflow();
    return CheckedInt(r);
  }
  friend constexpr CheckedInt operator-(CheckedInt a, CheckedInt b) {
    int64_t r = 0;
    if (!a.ok_ || !b.ok_ || __builtin_sub_overflow(a.v_, b.v_, &r)) return overflow();
    return CheckedInt(r);
  }
  friend constexpr CheckedInt operator*(CheckedInt a, CheckedInt b) {
    int64_t r = 0;
    if (!a.ok_ || !b.ok_ || __builtin_mul_overflow(a.v_, b.v_, &r)) return overflow();
    return CheckedInt(r);
  }
  CheckedInt& operator+=(CheckedInt b) { return *this = *this + b; }
  CheckedInt& operator*=(CheckedInt b) { return *this = *this * b; }

 private:
  int64_t v_ = 0;
  bool ok_ = true;
};

// count * elem_bytes as a byte count that fits size_t and ptrdiff_t (pointer arithmetic over
// the buffer must be defined too); nullopt when count < 0 or the product does not fit.
constexpr std::optional<size_t> checked_bytes(int64_t count, size_t elem_bytes) {
  if (count < 0) return std::nullopt;
  uint64_t r = 0;
  if (__builtin_mul_overflow(uint64_t(count), uint64_t(elem_bytes), &r)) return std::nullopt;
  if (r > uint64_t(std::numeric_limits<ptrdiff_t>::max())) return std::nullopt;
  return size_t(r);
}

// A whole decimal integer in [lo, hi]: optional sign, digits, nothing else (no spaces, no "1e3",
// no hex). Never throws; returns false on anything else, including out-of-range values.
bool parse_int64(std::string_view s, int64_t* out, int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max());

// Memory this process may use: physical memory, lowered by a cgroup (container) limit when one
// is set. Sizes beyond it can never be allocated here, so they are refused up front.
uint64_t host_memory_bytes();

// Memory this process can allocate now without the OOM killer or a failed allocation:
// /proc/meminfo's MemAvailable, lowered to what the cgroup limit leaves (limit - usage + its
// reclaimable page cache, v2 or v1) and to the address space RLIMIT_AS leaves. Read afresh on
// every call (a few small files): for decisions taken before a large allocation, not per call.
uint64_t available_host_memory_bytes();
// The same rule from given file contents (tests): meminfo's text, the cgroup's limit, usage and
// stat texts (empty: none), the RLIMIT_AS limit and the address space in use (0: unlimited).
uint64_t available_memory_from(const std::string& meminfo, const std::string& cg_limit, const std::string& cg_usage,
                               const std::string& cg_stat, uint64_t as_limit, uint64_t as_used);

// "12.0 GiB", "512 B": for messages.
std::string format_bytes(uint64_t bytes);

// Ok when `bytes` can be allocated on this host; otherwise InvalidArgument:
// "<what> needs 8.0 TiB, more than this machine's memory (23.4 GiB)".
Status check_host_allocation(uint64_t bytes, const std::string& what);
// The same for a sum of several byte counts that may overflow: pass the CheckedInt sum.
Status check_host_allocation(CheckedInt bytes, const std::string& what);
// Ok when `bytes` fit what is available now (available_host_memory_bytes()); otherwise
// ResourceExhausted: "<what> needs 8.0 GiB, more than the 5.2 GiB of memory available now".
Status check_available_memory(CheckedInt bytes, const std::string& what);

}  // namespace tunableop
