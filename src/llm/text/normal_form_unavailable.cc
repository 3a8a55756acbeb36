// Builds without utf8proc (CMake found no libutf8proc-dev): no Unicode normal forms.
#include "llm/text/normalizer.h"

namespace tunableop::llm {

bool unicode_normalization_available() { return false; }

StatusOr<std::string> unicode_normal_form(std::string_view, std::string_view form) {
  return Status::unsupported(std::string(form) + " needs utf8proc, which this build lacks (install libutf8proc-dev)");
}

}  // namespace tunableop::llm
