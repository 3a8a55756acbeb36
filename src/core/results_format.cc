// Text form of results files (PyTorch TunableOp's layout) and the naming rules around them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "core/results_stats.h"
#include "tunableop/results.h"

namespace tunableop {
namespace {

constexpr std::string_view kValidatorTag = "Validator";
constexpr std::string_view kVersionKey = "TUNABLEOP_VERSION";

// Blanks on both sides; a UTF-8 byte order mark before a field counts as blank too (an editor
// may put one at the start of a file, a concatenation at the start of any line), so what we
// write and what we read back never differ by one (found by fuzz/results_file_fuzzer).
std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  for (;;) {
    if (b < e && (s[b] == ' ' || s[b] == '\t')) {
      ++b;
    } else if (s.substr(b, 3) == "\xEF\xBB\xBF") {
      b += 3;
    } else {
      break;
    }
  }
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(trim(line.substr(start)));
      return out;
    }
    out.push_back(trim(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

// Calls fn(line_number, line) for every line; a trailing '\r' (CRLF files) is dropped.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  // A UTF-8 byte order mark (Windows editors add one) is not part of the first line.
  size_t start = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
  int number = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(++number, line);
    start = end + 1;
  }
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

// A non-negative finite number written in full ("0.0653662", "1e-05"); anything else is not a time.
bool parse_number(std::string_view s, double* out) {
  if (s.empty()) return false;
  const char* first = s.data();
  if (*first == '+') ++first;  // from_chars rejects a leading '+', some writers emit one
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(*out) && *out >= 0;
}

std::string format_number(double v) { return fmt::format("{:.6g}", v); }

std::string join_fields(std::initializer_list<std::string_view> fields) {
  std::string out;
  bool first = true;
  for (std::string_view f : fields) {
    if (!first) out += ',';
    out += f;
    first = false;
  }
  return out;
}

}  // namespace

std::string sanitize_field(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == ',') c = ';';
    if (c == '\n' || c == '\r') c = ' ';
  }
  // Editors and parsers differ on surrounding blanks; trimming on both sides keeps values equal.
  return std::string(trim(out));
}

LoadReport parse_results(const std::string& text, const std::string& path_for_messages) {
  LoadReport report;
  report.path = path_for_messages;
  std::map<std::string, size_t> validator_index;
  std::map<std::pair<std::string, std::string>, size_t> entry_index;
  auto bad = [&](int line, const std::string& why) {
    report.malformed.push_back(fmt::format("{}:{}: {}", path_for_messages, line, why));
  };

  for_each_line(text, [&](int number, std::string_view line) {
    if (is_blank(line)) return;
    // Every field as format_entry() would write it back (a carriage return inside a line becomes a
    // blank, blanks around it are trimmed): what we read is what we write, so a field of
    // "Validator\r" or "\r" cannot parse one way and come back another (fuzz/results_file_fuzzer).
    std::vector<std::string> f;
    for (std::string_view field : split_commas(line)) f.push_back(sanitize_field(std::string(field)));
    if (f[0] == kValidatorTag) {
      if (f.size() != 3) {
        bad(number, fmt::format("a Validator line has 3 fields (Validator,KEY,VALUE), found {}", f.size()));
        return;
      }
      // An empty value is allowed: PyTorch writes one when a library version is unknown.
      if (f[1].empty()) return bad(number, "empty validator key");
      std::string key(f[1]), value(f[2]);
      auto it = validator_index.find(key);
      if (it == validator_index.end()) {
        validator_index.emplace(key, report.validators.size());
        report.validators.emplace_back(key, value);
      } else if (report.validators[it->second].second != value) {
        // Two environments mixed in one file: the first block is the file's identity.
        bad(number, fmt::format("validator {} repeated with another value ('{}', first was '{}'); ignored", key, value,
                                report.validators[it->second].second));
      }
      return;
    }
    if (f.size() != 4) {
      bad(number, fmt::format("a result line has 4 fields (OP,PARAMS,SOLUTION,TIME), found {}", f.size()));
      return;
    }
    for (size_t i = 0; i < 4; ++i) {
      static const char* kNames[] = {"op", "params", "solution", "time"};
      if (f[i].empty()) return bad(number, fmt::format("empty {} field", kNames[i]));
    }
    ResultEntry e;
    if (!parse_number(f[3], &e.time_ms)) {
      return bad(number, fmt::format("time '{}' is not a non-negative number", f[3]));
    }
    e.op = f[0];
    e.params = f[1];
    e.solution = f[2];
    auto key = std::make_pair(e.op, e.params);
    auto it = entry_index.find(key);
    if (it != entry_index.end()) {
      report.entries[it->second] = std::move(e);  // a later line wins (re-tuned or merged)
    } else {
      entry_index.emplace(std::move(key), report.entries.size());
      report.entries.push_back(std::move(e));
    }
  });

  report.ours = validator_index.count(std::string(kVersionKey)) > 0;
  if (!report.ours) {
    for (const auto& [key, value] : report.validators) report.foreign_validators.push_back(key);
  }
  return report;
}

std::string format_validators(const Validators& v) {
  std::string out;
  for (const auto& [key, value] : v) {
    out += join_fields({kValidatorTag, sanitize_field(key), sanitize_field(value)});
    out += '\n';
  }
  return out;
}

std::string format_entry(const ResultEntry& e) {
  std::string line = join_fields(
      {sanitize_field(e.op), sanitize_field(e.params), sanitize_field(e.solution), format_number(e.time_ms)});
  line += '\n';
  return line;
}

std::string results_path_for(const std::string& pattern, const std::string& ordinal) {
  if (pattern.find("%d") != std::string::npos) {
    std::string out;
    size_t start = 0;
    for (size_t pos; (pos = pattern.find("%d", start)) != std::string::npos; start = pos + 2) {
      out.append(pattern, start, pos - start);
      out += ordinal;
    }
    out.append(pattern, start, std::string::npos);
    return out;
  }
  // The extension belongs to the last path component only ("dir.v2/results" has none).
  size_t slash = pattern.find_last_of('/');
  size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = pattern.find_last_of('.');
  // A leading dot names a hidden file, not an extension.
  if (dot == std::string::npos || dot <= name_start) return pattern + ordinal;
  return pattern.substr(0, dot) + ordinal + pattern.substr(dot);
}

std::string validators_hash(const Validators& v) {
  std::vector<std::pair<std::string, std::string>> sorted;
  for (const auto& [key, value] : v) sorted.emplace_back(sanitize_field(key), sanitize_field(value));
  std::sort(sorted.begin(), sorted.end());
  uint32_t h = 2166136261u;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 16777619u;
    }
  };
  for (const auto& [key, value] : sorted) {
    mix(key);
    mix(std::string_view("\0", 1));
    mix(value);
    mix("\n");
  }
  return fmt::format("{:08x}", h);
}

std::string env_sibling_path(const std::string& path, const Validators& current, int index) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::string ext = p.extension().string();
  std::string name = p.stem().string() + ".env-" + validators_hash(current);
  if (index > 1) name += fmt::format("-{}", index);
  name += ext.empty() ? ".csv" : ext;
  return (p.parent_path() / name).string();
}

std::string stats_path_for(const std::string& results_path) { return results_path + ".stats"; }

std::string format_stats_line(const ResultEntry& e) {
  if (!e.stats && e.note.empty()) return "";
  const Measurement m = e.stats.value_or(Measurement{});  // a note alone: no runs
  std::string line = join_fields({sanitize_field(e.op), sanitize_field(e.params), sanitize_field(e.solution),
                                  format_number(m.min_ms), format_number(m.median_ms), format_number(m.mean_ms),
                                  format_number(m.std_ms), std::to_string(m.runs), format_number(e.tuning_ms)});
  // How the final rounds were timed, and the device's clock and power then (fields 11-13; an
  // unknown reading is an empty field): the note's field comes first, empty when there is none.
  const std::string rounds = sanitize_field(e.final_rounds);
  const bool conditions = !trim(rounds).empty();
  if (!e.note.empty() || conditions) line.append(1, ',').append(sanitize_field(e.note));
  if (conditions) {
    auto reading = [](double v) { return v > 0 && std::isfinite(v) ? format_number(v) : std::string(); };
    line.append(1, ',').append(join_fields({rounds, reading(e.sm_mhz), reading(e.power_w)}));
  }
  line += '\n';
  return line;
}

std::vector<ResultEntry> parse_stats(const std::string& text, const std::string& path_for_messages,
                                     std::vector<std::string>* malformed) {
  std::vector<ResultEntry> out;
  for_each_line(text, [&](int number, std::string_view line) {
    if (is_blank(line)) return;
    std::vector<std::string_view> f = split_commas(line);
    double v[6] = {};
    bool ok = (f.size() == 9 || f.size() == 10 || f.size() == 13) && !f[0].empty() && !f[1].empty() && !f[2].empty();
    for (size_t i = 0; ok && i < 6; ++i) ok = parse_number(f[3 + i], &v[i]);
    // Fields 12 and 13 (SM clock, power) are empty when they were not known.
    double sm = 0, power = 0;
    if (ok && f.size() == 13)
      ok = (f[11].empty() || parse_number(f[11], &sm)) && (f[12].empty() || parse_number(f[12], &power));
    // The run count becomes an int: a fraction, a negative count or one past INT_MAX (an edited
    // or damaged file) is malformed, not a conversion out of range.
    if (!ok || v[4] != std::floor(v[4]) || v[4] < 0 || v[4] > double(std::numeric_limits<int>::max())) {
      if (malformed) {
        malformed->push_back(
            fmt::format("{}:{}: a stats line has 9, 10 or 13 fields "
                        "(OP,PARAMS,SOLUTION,min,median,mean,std,runs,tuning_ms[,note[,final_rounds,sm_mhz,power_w]])",
                        path_for_messages, number));
      }
      return;
    }
    ResultEntry e;
    e.op = f[0];
    e.params = f[1];
    e.solution = f[2];
    if (v[4] > 0) e.stats = Measurement{v[0], v[1], v[2], v[3], static_cast<int>(v[4])};  // 0 runs: a note alone
    e.time_ms = v[1];
    e.tuning_ms = v[5];
    if (f.size() >= 10) e.note = f[9];
    if (f.size() == 13) {
      e.final_rounds = f[10];
      e.sm_mhz = sm;
      e.power_w = power;
    }
    out.push_back(std::move(e));
  });
  return out;
}

}  // namespace tunableop
