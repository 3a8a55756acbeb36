#include "tunableop/checked_size.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

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

std::string read_small_file(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after "<key>" (a line "key value [kB]") in a /proc or cgroup stat text; nullopt if absent.
std::optional<uint64_t> stat_value(const std::string& text, const std::string& key, uint64_t unit) {
  for (size_t pos = 0; (pos = text.find(key, pos)) != std::string::npos; pos += key.size()) {
    if (pos != 0 && text[pos - 1] != '\n') continue;
    size_t v = pos + key.size();
    if (v >= text.size() || (text[v] != ' ' && text[v] != ':' && text[v] != '\t')) continue;
    while (v < text.size() && (text[v] == ' ' || text[v] == ':' || text[v] == '\t')) ++v;
    size_t end = v;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    int64_t n = 0;
    if (!parse_int64(std::string_view(text).substr(v, end - v), &n, 0)) return std::nullopt;
    uint64_t r = 0;
    if (__builtin_mul_overflow(uint64_t(n), unit, &r)) return UINT64_MAX;
    return r;
  }
  return std::nullopt;
}

uint64_t first_number(const std::string& text) {
  int64_t v = 0;
  size_t end = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  return parse_int64(std::string_view(text).substr(0, end), &v, 0) ? uint64_t(v) : 0;
}

}  // namespace

uint64_t available_memory_from(const std::string& meminfo, const std::string& cg_limit, const std::string& cg_usage,
                               const std::string& cg_stat, uint64_t as_limit, uint64_t as_used) {
  uint64_t avail = stat_value(meminfo, "MemAvailable", 1024).value_or(host_memory_bytes());
  // A cgroup limit ("max" or absent: none) counts its usage, less the page cache it can drop.
  if (const uint64_t limit = first_number(cg_limit); limit > 0) {
    const uint64_t used = first_number(cg_usage);
    const uint64_t cache =
        stat_value(cg_stat, "inactive_file", 1).value_or(stat_value(cg_stat, "total_inactive_file", 1).value_or(0));
    const uint64_t working = used > cache ? used - cache : 0;
    avail = std::min(avail, limit > working ? limit - working : 0);
  }
  if (as_limit > 0) avail = std::min(avail, as_limit > as_used ? as_limit - as_used : 0);
  return avail;
}

uint64_t available_host_memory_bytes() {
  std::string limit, usage, stat;
  if (std::string v2 = read_small_file("/sys/fs/cgroup/memory.max"); !v2.empty()) {
    limit = v2;
    usage = read_small_file("/sys/fs/cgroup/memory.current");
    stat = read_small_file("/sys/fs/cgroup/memory.stat");
  } else if (std::string v1 = read_small_file("/sys/fs/cgroup/memory/memory.limit_in_bytes"); !v1.empty()) {
    limit = v1;
    usage = read_small_file("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    stat = read_small_file("/sys/fs/cgroup/memory/memory.stat");
  }
  uint64_t as_limit = 0, as_used = 0;
  rlimit rl{};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    as_limit = uint64_t(rl.rlim_cur);
    const long page = ::sysconf(_SC_PAGESIZE);
    as_used = first_number(read_small_file("/proc/self/statm")) * uint64_t(page > 0 ? page : 4096);
  }
  return available_memory_from(read_small_file("/proc/meminfo"), limit, usage, stat, as_limit, as_used);
}

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

Status check_available_memory(CheckedInt bytes, const std::string& what) {
  TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(bytes, what));
  const uint64_t avail = available_host_memory_bytes();
  if (uint64_t(bytes.value()) <= avail) return Status::ok();
  return Status::resource_exhausted(fmt::format("{} needs {}, more than the {} of memory available now", what,
                                                format_bytes(uint64_t(bytes.value())), format_bytes(avail)));
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
