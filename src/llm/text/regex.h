// The pre-tokenizers' regular expressions, through PCRE2 (UTF mode, Unicode properties for \p{..}
// and \d, JIT where the platform has it). Hugging Face `tokenizers` runs these patterns with
// Oniguruma, whose \s is Unicode's White_Space; PCRE2's \s lacks U+0085 (NEL), so \s and \S are
// spelled out as White_Space classes before compiling. Everything else is PCRE2's own syntax,
// which agrees with Oniguruma's on what tokenizer.json files use ((?i:...), \p{L}, \p{N},
// lookahead, {m,n}). PCRE2 is an optional build dependency (libpcre2-dev): without it
// compile() says so.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

class Regex {
 public:
  // `where` names the pattern's source in errors ("tokenizer.json: pre_tokenizer.pretokenizers[0].pattern").
  static StatusOr<std::unique_ptr<Regex>> compile(std::string_view pattern, const std::string& where);
  ~Regex();

  // Non-overlapping matches, left to right, as [begin, end) byte ranges of `text` (valid UTF-8);
  // empty matches are skipped.
  StatusOr<std::vector<std::pair<size_t, size_t>>> find_all(std::string_view text) const;
  // Whether the pattern matches somewhere in `text`.
  StatusOr<bool> search(std::string_view text) const;

  const std::string& where() const { return where_; }

  struct Impl;  // PCRE2's compiled pattern (opaque)

 private:
  explicit Regex(std::unique_ptr<Impl> impl, std::string where);
  std::unique_ptr<Impl> impl_;
  std::string where_;
};

// Whether this build has PCRE2 (and so reads tokenizer.json).
bool regex_available();

// `pattern` with \s and \S as Unicode White_Space classes (exposed for tests).
StatusOr<std::string> spell_out_white_space(std::string_view pattern);

}  // namespace tunableop::llm
