#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "llm/text/regex.h"
#include "llm/text/utf8.h"

namespace tunableop::llm {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

// One match from `start`: rc as pcre2_match gives it. JIT first; a JIT stack too small for the
// text (a long run the pattern backtracks over) falls back to the interpreter.
int match_at(const Regex::Impl& re, std::string_view text, size_t start, pcre2_match_data* md, uint32_t options) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(re.code, subject, text.size(), start, options | PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc = pcre2_match(re.code, subject, text.size(), start, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
  }
  return rc;
}

}  // namespace

bool regex_available() { return true; }

Regex::Regex(std::unique_ptr<Impl> impl, std::string where) : impl_(std::move(impl)), where_(std::move(where)) {}
Regex::~Regex() = default;

StatusOr<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern, const std::string& where) {
  auto spelled = spell_out_white_space(pattern);
  if (!spelled.is_ok()) return Status::unsupported(where + ": " + spelled.status().message());
  if (utf8::first_invalid(pattern) != std::string_view::npos) {
    return Status::parse_error(where + ": the pattern is not valid UTF-8");
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto impl = std::make_unique<Impl>();
  // The offset reported is in the pattern as compiled (\s spelled out); compile the original
  // first so that a bad pattern's offset is the file's.
  pcre2_code* original = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!original) {
    return Status::parse_error(where + ": PCRE2 rejects the pattern at offset " + std::to_string(offset) + ": " +
                               pcre2_message(error) + " (pattern \"" + utf8::excerpt(pattern) + "\")");
  }
  pcre2_code_free(original);
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spelled->data()), spelled->size(), PCRE2_UTF | PCRE2_UCP,
                             &error, &offset, nullptr);
  if (!impl->code) {
    return Status::parse_error(where + ": PCRE2 rejects the pattern with \\s spelled out, at offset " +
                               std::to_string(offset) + ": " + pcre2_message(error));
  }
  impl->jit = pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE) == 0;  // no JIT: the interpreter
  return std::unique_ptr<Regex>(new Regex(std::move(impl), where));
}

StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) return Status::resource_exhausted(where_ + ": out of memory for PCRE2 match data");
  size_t start = 0;
  Status status;
  while (start <= text.size()) {
    const int rc = match_at(*impl_, text, start, md, 0);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = Status::invalid_argument(where_ + ": matching the pattern failed: " + pcre2_message(rc));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] > ov[0]) {
      out.emplace_back(ov[0], ov[1]);
      start = ov[1];
    } else {  // empty match: step over one character
      if (ov[0] >= text.size()) break;
      const size_t n = utf8::sequence_length(text, ov[0]);
      start = ov[0] + (n ? n : 1);
    }
  }
  pcre2_match_data_free(md);
  if (!status.is_ok()) return status;
  return out;
}

StatusOr<bool> Regex::search(std::string_view text) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) return Status::resource_exhausted(where_ + ": out of memory for PCRE2 match data");
  const int rc = match_at(*impl_, text, 0, md, 0);
  pcre2_match_data_free(md);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) return Status::invalid_argument(where_ + ": matching the pattern failed: " + pcre2_message(rc));
  return true;
}

}  // namespace tunableop::llm
