// The model directory's JSON files (tokenizer.json, tokenizer_config.json, generation_config.json,
// config.json) as the text library reads them: through read_regular_file (never blocks on a
// FIFO), nesting bounded (a file of a million '[' is an error, not a stack overflow in the code
// that walks it), errors naming the file.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tunableop/status.h"

namespace tunableop::llm {

// Deeper than any tokenizer or config file is (tokenizer.json: about 6 levels).
constexpr int kMaxJsonDepth = 64;

// The file's top level, which must be an object.
StatusOr<nlohmann::json> read_json_object(const std::string& path);

// DIR/NAME when it exists (nullopt when it does not); present but broken is an error.
StatusOr<std::optional<nlohmann::json>> read_optional_json_object(const std::string& dir, const std::string& name);

}  // namespace tunableop::llm
