#include "llm/text/pre_tokenizer.h"

#include <functional>
#include <optional>

#include "llm/text/byte_level.h"
#include "llm/text/regex.h"
#include "llm/text/utf8.h"

namespace tunableop::llm {

namespace {

using json = nlohmann::json;

// GPT-2's split, what ByteLevel's use_regex applies.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool match;
};

// The pieces of a split, as `tokenizers` forms them from the matches and the gaps between them.
std::vector<Span> arrange(std::vector<Span> spans, Behavior b) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (b) {
    case Behavior::kIsolated: return spans;
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.match) out.push_back(s);
      }
      return out;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.match;
      }
      return out;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->match;
      }
      return {out.rbegin(), out.rend()};
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.match;
      }
      return out;
  }
  return spans;
}

// Matches and the gaps between them, covering `text`.
std::vector<Span> with_gaps(const std::vector<std::pair<size_t, size_t>>& matches, size_t size, bool invert) {
  std::vector<Span> spans;
  size_t at = 0;
  for (const auto& [b, e] : matches) {
    if (b > at) spans.push_back({at, b, invert});
    spans.push_back({b, e, !invert});
    at = e;
  }
  if (at < size) spans.push_back({at, size, invert});
  return spans;
}

Status split_pieces(std::vector<std::string>& pieces, Behavior behavior, bool invert,
                    const std::function<StatusOr<std::vector<std::pair<size_t, size_t>>>(std::string_view)>& find) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const std::string& p : pieces) {
    auto matches = find(p);
    if (!matches.is_ok()) return matches.status();
    for (const Span& s : arrange(with_gaps(*matches, p.size(), invert), behavior)) {
      if (s.end > s.begin) out.push_back(p.substr(s.begin, s.end - s.begin));
    }
  }
  pieces = std::move(out);
  return Status::ok();
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> regex, std::string literal, Behavior behavior, bool invert)
      : regex_(std::move(regex)), literal_(std::move(literal)), behavior_(behavior), invert_(invert) {}

  Status apply(std::vector<std::string>& pieces) const override {
    return split_pieces(pieces, behavior_, invert_,
                        [&](std::string_view text) -> StatusOr<std::vector<std::pair<size_t, size_t>>> {
                          if (regex_) return regex_->find_all(text);
                          std::vector<std::pair<size_t, size_t>> m;
                          for (size_t at = text.find(literal_); at != std::string_view::npos;
                               at = text.find(literal_, at + literal_.size())) {
                            m.emplace_back(at, at + literal_.size());
                          }
                          return m;
                        });
  }
  bool byte_level() const override { return false; }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}

  Status apply(std::vector<std::string>& pieces) const override {
    if (add_prefix_space_) {
      for (std::string& p : pieces) {
        if (p.empty() || p[0] != ' ') p.insert(p.begin(), ' ');
      }
    }
    if (regex_) {
      TUNABLEOP_RETURN_IF_ERROR(
          split_pieces(pieces, Behavior::kIsolated, false, [&](std::string_view t) { return regex_->find_all(t); }));
    }
    for (std::string& p : pieces) p = byte_level::encode(p);
    return Status::ok();
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  Status apply(std::vector<std::string>& pieces) const override {
    for (const auto& p : parts_) TUNABLEOP_RETURN_IF_ERROR(p->apply(pieces));
    return Status::ok();
  }
  bool byte_level() const override {
    for (const auto& p : parts_) {
      if (p->byte_level()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

StatusOr<bool> bool_field(const json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_boolean()) return Status::parse_error(where + "." + key + ": must be true or false");
  return j.at(key).get<bool>();
}

StatusOr<std::unique_ptr<PreTokenizer>> make_split(const json& j, const std::string& where) {
  if (!j.contains("pattern") || !j.at("pattern").is_object()) {
    return Status::parse_error(where + ".pattern: must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  }
  const json& pat = j.at("pattern");
  std::unique_ptr<Regex> regex;
  std::string literal;
  if (pat.contains("Regex") && pat.at("Regex").is_string()) {
    auto r = Regex::compile(pat.at("Regex").get<std::string>(), where + ".pattern.Regex");
    if (!r.is_ok()) return r.status();
    regex = std::move(*r);
  } else if (pat.contains("String") && pat.at("String").is_string()) {
    literal = pat.at("String").get<std::string>();
    if (literal.empty()) return Status::parse_error(where + ".pattern.String: must not be empty");
  } else {
    return Status::parse_error(where + ".pattern: must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  }
  static const std::pair<const char*, Behavior> kBehaviors[] = {{"Removed", Behavior::kRemoved},
                                                                {"Isolated", Behavior::kIsolated},
                                                                {"MergedWithPrevious", Behavior::kMergedWithPrevious},
                                                                {"MergedWithNext", Behavior::kMergedWithNext},
                                                                {"Contiguous", Behavior::kContiguous}};
  if (!j.contains("behavior") || !j.at("behavior").is_string()) {
    return Status::parse_error(where + ".behavior: must be a string (Isolated, Removed, MergedWithPrevious, ...)");
  }
  const std::string name = j.at("behavior").get<std::string>();
  std::optional<Behavior> behavior;
  for (const auto& [n, b] : kBehaviors) {
    if (name == n) behavior = b;
  }
  if (!behavior) {
    return Status::parse_error(where + ".behavior: unknown \"" + utf8::excerpt(name) +
                               "\" (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
  }
  auto invert = bool_field(j, "invert", false, where);
  if (!invert.is_ok()) return invert.status();
  return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(regex), literal, *behavior, *invert));
}

}  // namespace

StatusOr<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const json& j, const std::string& where) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  if (!j.is_object() || !j.contains("type") || !j.at("type").is_string()) {
    return Status::parse_error(where + ": must be null or an object with a string \"type\"");
  }
  const std::string type = j.at("type").get<std::string>();
  if (type == "Split") return make_split(j, where);
  if (type == "ByteLevel") {
    auto prefix = bool_field(j, "add_prefix_space", true, where);
    if (!prefix.is_ok()) return prefix.status();
    auto use_regex = bool_field(j, "use_regex", true, where);
    if (!use_regex.is_ok()) return use_regex.status();
    std::unique_ptr<Regex> regex;
    if (*use_regex) {
      auto r = Regex::compile(kGpt2Pattern, where + " (GPT-2's split, use_regex)");
      if (!r.is_ok()) return r.status();
      regex = std::move(*r);
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(*prefix, std::move(regex)));
  }
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j.at("pretokenizers").is_array()) {
      return Status::parse_error(where + ": a Sequence needs a \"pretokenizers\" list");
    }
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const json& list = j.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      if (!part.is_ok()) return part.status();
      if (*part) parts.push_back(std::move(*part));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(parts)));
  }
  return Status::unsupported(where + ": pre-tokenizer type \"" + utf8::excerpt(type) +
                             "\" is not supported (supported: Split, ByteLevel, Sequence: the byte-level BPE "
                             "tokenizers of Llama-3, Qwen and Mistral)");
}

}  // namespace tunableop::llm
