// The chat-template parser's entry point (jinja_parse.cc), for jinja.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "llm/text/jinja_ast.h"
#include "tunableop/status.h"

namespace tunableop::llm::jinja {

// `source` as Jinja reads it (newlines normalised, one trailing newline dropped), parsed.
StatusOr<std::shared_ptr<const Body>> parse_template(std::string_view source, const std::string& name);

}  // namespace tunableop::llm::jinja
