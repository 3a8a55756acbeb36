#include "cli_support.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>

#include "tunableop/checked_size.h"

namespace tunableop::cli {

CLI::Validator at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& value) -> std::string {
        int64_t v = 0;
        if (parse_int64(value, &v)) return v >= lo ? "" : fmt::format("must be >= {} (got {})", lo, v);
        char* end = nullptr;
        double d = std::strtod(value.c_str(), &end);  // "1e12" is converted by CLI11 later
        if (end != value.c_str() && *end == '\0' && d < double(lo))
          return fmt::format("must be >= {} (got {})", lo, value);
        return "";
      },
      fmt::format(">= {}", lo), fmt::format("at least {}", lo));
}

StatusOr<std::vector<int>> parse_gpu_list(const std::string& list) {
  std::vector<int> out;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int64_t v = 0;
    if (!parse_int64(item, &v, 0, 1 << 20)) {
      return Status::invalid_argument(fmt::format(
          "--gpus: '{}' is not a GPU ordinal (give 'all' or a comma list of ordinals, e.g. 0,1)", printable(item)));
    }
    out.push_back(int(v));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
      ++i;
    } else if (c < 0x80) {
      out += char(c);
      ++i;
    } else {
      // A well-formed UTF-8 sequence (no overlongs, no surrogates) that is not a C1 control.
      size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
      bool ok = n > 0 && i + n <= s.size();
      for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok) {
        const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        if (n == 2 && c == 0xc2 && c1 < 0xa0) ok = false;  // U+0080..U+009F: C1 controls
        if (n == 3 && ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0))) ok = false;  // overlong, surrogate
        if (n == 4 && ((c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90))) ok = false;  // overlong, > U+10FFFF
      }
      if (!ok) {
        hex(c);
        ++i;
        continue;
      }
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool report_unsaved(Context& ctx, const char* command) {
  auto unsaved = ctx.unsaved_results();
  if (unsaved.empty()) return false;
  std::map<std::string, int> lost, no_stats;  // reason -> count
  for (const auto& u : unsaved) ++(u.line_written ? no_stats : lost)[u.why.message()];
  auto count = [](const std::map<std::string, int>& m) {
    int n = 0;
    for (const auto& [why, k] : m) n += k;
    return n;
  };
  if (int n = count(no_stats)) {
    fmt::print(stderr, "tunableop {}: {} result{} saved without {} statistics:\n", command, n, n == 1 ? "" : "s",
               n == 1 ? "its" : "their");
    for (const auto& [why, k] : no_stats) fmt::print(stderr, "  {} ({}x)\n", printable(why), k);
  }
  if (int n = count(lost)) {
    fmt::print(stderr, "tunableop {}: {} tuned result{} not saved:\n", command, n, n == 1 ? "" : "s");
    for (const auto& [why, k] : lost) fmt::print(stderr, "  {} ({}x)\n", printable(why), k);
    fmt::print(stderr, "the unsaved results (results-file lines, to append once the file can be written):\n");
    for (const auto& u : unsaved) {
      if (u.line_written) continue;
      std::string line = format_entry(u.entry);
      line.pop_back();  // its newline
      fmt::print(stderr, "{}\n", printable(line));
    }
  }
  return true;
}

}  // namespace tunableop::cli
