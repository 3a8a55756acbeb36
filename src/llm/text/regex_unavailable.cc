// Builds without PCRE2 (CMake found no libpcre2-dev): no pre-tokenizer regexes, so no tokenizer.json.
#include "llm/text/regex.h"

namespace tunableop::llm {

struct Regex::Impl {};

bool regex_available() { return false; }

Regex::Regex(std::unique_ptr<Impl> impl, std::string where) : impl_(std::move(impl)), where_(std::move(where)) {}
Regex::~Regex() = default;

StatusOr<std::unique_ptr<Regex>> Regex::compile(std::string_view, const std::string& where) {
  return Status::unsupported(where +
                             ": this build has no PCRE2, so tokenizer.json cannot be read (install "
                             "libpcre2-dev and rebuild)");
}

StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::find_all(std::string_view) const {
  return Status::unsupported(where_ + ": this build has no PCRE2");
}

StatusOr<bool> Regex::search(std::string_view) const {
  return Status::unsupported(where_ + ": this build has no PCRE2");
}

}  // namespace tunableop::llm
