#include "tunableop/checked_size.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

namespace tunableop {

bool parse_int64(std::string_view s, int64_t* out, int64_t lo, int64_t hi) {
  if (s.empty()) return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (*first == '+') {  // from_chars takes '-' but not '+'; "+-1" is not a number
    ++first;
    if (first == last || *first == '-') return false;
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(first, last, v, 10);
  if (ec != std::errc() || ptr != last || v < lo || v > hi) return false;
  *out = v;
  return true;
}

namespace {

// cgroup v2 (memory.max) or v1 (memory.limit_in_bytes); 0 when there is none or it is "max".
uint64_t cgroup_memory_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text)) continue;
    int64_t v = 0;
    if (parse_int64(text, &v, 1)) return uint64_t(v);
  }
  return 0;
}

}  // namespace

uint64_t host_memory_bytes() {
  static const uint64_t bytes = [] {
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t(1) << 40;
    uint64_t cg = cgroup_memory_limit();
    return cg > 0 && cg < phys ? cg : phys;
  }();
  return bytes;
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

Status check_host_allocation(uint64_t bytes, const std::string& what) {
  const uint64_t limit = host_memory_bytes();
  if (bytes <= limit) return Status::ok();
  return Status::invalid_argument(
      fmt::format("{} needs {}, more than this machine's memory ({})", what, format_bytes(bytes), format_bytes(limit)));
}

Status check_host_allocation(CheckedInt bytes, const std::string& what) {
  if (!bytes.ok() || bytes.value() < 0) {
    return Status::invalid_argument(
        fmt::format("{} needs more than 2^63 bytes (the size overflows), more than this machine's memory ({})", what,
                    format_bytes(host_memory_bytes())));
  }
  return check_host_allocation(uint64_t(bytes.value()), what);
}

}  // namespace tunableop
