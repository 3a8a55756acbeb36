#include "tunableop/cpu_info.h"

#include <fmt/format.h>
#include <sched.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace tunableop {

namespace {
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "";
}
}  // namespace

std::string cpu_model_name() {
  std::string m = cpuinfo_field("model name");
  return m.empty() ? "unknown-cpu" : m;
}

std::string cpu_isa_flags() {
  static const char* kRelevant[] = {"sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
                                    "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_fp16", "avx512_vnni",
                                    "amx_bf16", "amx_tile", "asimd",    "sve"};
  std::istringstream flags(cpuinfo_field("flags") + " " + cpuinfo_field("Features"));
  std::set<std::string> have;
  std::string f;
  while (flags >> f) have.insert(f);
  std::string out;
  for (const char* r : kRelevant)
    if (have.count(r)) out += (out.empty() ? "" : " ") + std::string(r);
  return out;
}

int cpu_core_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

std::string cpu_validator_value() {
  return fmt::format("{} {} {} cores", cpu_model_name(), cpu_isa_flags(), cpu_core_count());
}

size_t cpu_last_level_cache_bytes() {
  size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", i));
    std::string s;
    if (!(in >> s)) continue;
    size_t v = std::stoull(s);
    char unit = s.back();
    if (unit == 'K') v <<= 10;
    if (unit == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best ? best : size_t(32) << 20;
}

}  // namespace tunableop
