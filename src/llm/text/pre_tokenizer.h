// A tokenizer.json "pre_tokenizer": how text is cut into words before BPE. Supported: Split
// (a regex through PCRE2, or a literal string; every behavior; invert), ByteLevel (optional
// prefix space, GPT-2's split regex when use_regex, then bytes to characters) and Sequence, which
// is what Llama-3, Qwen2/2.5/3 and Mistral's tekken-era tokenizers write:
//   {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "..."},
//    "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false, ...}]}
// Other types (Metaspace, Whitespace, BertPreTokenizer, Digits, ...) are refused by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tunableop/status.h"

namespace tunableop::llm {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Cuts every piece further (in order) and may rewrite it (ByteLevel maps bytes to characters).
  virtual Status apply(std::vector<std::string>& pieces) const = 0;
  // Whether the pieces come out as byte-level characters.
  virtual bool byte_level() const = 0;
};

// Null JSON: no pre-tokenizer (nullptr). `where` names the field in errors.
StatusOr<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace tunableop::llm
