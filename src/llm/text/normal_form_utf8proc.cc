#include <utf8proc.h>

#include <cstdlib>

#include "llm/text/normalizer.h"

namespace tunableop::llm {

bool unicode_normalization_available() { return true; }

StatusOr<std::string> unicode_normal_form(std::string_view text, std::string_view form) {
  int options = UTF8PROC_STABLE;
  if (form == "NFC") {
    options |= UTF8PROC_COMPOSE;
  } else if (form == "NFD") {
    options |= UTF8PROC_DECOMPOSE;
  } else if (form == "NFKC") {
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  } else if (form == "NFKD") {
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  } else {
    return Status::invalid_argument("unknown Unicode normal form \"" + std::string(form) + "\"");
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          utf8proc_ssize_t(text.size()), &out, utf8proc_option_t(options));
  if (n < 0) return Status::invalid_argument(std::string("Unicode normalisation failed: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return result;
}

}  // namespace tunableop::llm
