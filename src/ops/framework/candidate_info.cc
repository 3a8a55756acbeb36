#include <fmt/format.h>

#include "tunableop/op.h"

namespace tunableop {

std::string CandidateInfo::get(std::string_view key) const {
  for (const auto& [k, v] : details)
    if (k == key) return v;
  return "";
}

std::string CandidateInfo::family() const {
  if (library.empty()) return algorithm;
  return algorithm.empty() ? library : library + " " + algorithm;
}

std::string CandidateInfo::to_string() const {
  std::string out = family();
  if (details.empty()) return out;
  out += " (";
  for (size_t i = 0; i < details.size(); ++i)
    out += fmt::format("{}{}={}", i ? ", " : "", details[i].first, details[i].second);
  return out + ")";
}

}  // namespace tunableop
