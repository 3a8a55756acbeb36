// A tokenizer.json "normalizer": null, the Unicode normal forms (Qwen's tokenizers apply NFC) or
// a Sequence of them. The normal forms come from utf8proc (libutf8proc-dev, optional: without it
// a tokenizer.json that asks for one is refused with a message). Other normalizers (Lowercase,
// Replace, Prepend, ...: the SentencePiece-style and BERT-style tokenizers) are refused by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tunableop/status.h"

namespace tunableop::llm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual StatusOr<std::string> normalize(std::string_view text) const = 0;
};

// Null JSON: no normalizer (nullptr). `where` names the field in errors.
StatusOr<std::unique_ptr<Normalizer>> make_normalizer(const nlohmann::json& j, const std::string& where);

// The Unicode normal form `form` ("NFC", "NFD", "NFKC", "NFKD") of valid UTF-8 `text`.
StatusOr<std::string> unicode_normal_form(std::string_view text, std::string_view form);
bool unicode_normalization_available();

}  // namespace tunableop::llm
