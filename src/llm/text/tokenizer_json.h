// tokenizer.json (Hugging Face `tokenizers`' serialisation) holding a byte-level BPE: the
// tokenizers of Llama-3, Qwen2/2.5/3 and Mistral's tekken-era releases. Read as `tokenizers`
// reads it:
//   added_tokens    matched first, in the raw text (added_tokens.h), each its own id
//   normalizer      null or NFC (normalizer.h)
//   pre_tokenizer   Split (PCRE2 regex) / ByteLevel / Sequence (pre_tokenizer.h)
//   model           BPE: vocab, merges ("a b" strings or [a, b] pairs), ignore_merges,
//                   byte_fallback, unk_token (bpe_model.h)
//   post_processor  TemplateProcessing (what encode_prompt puts around a text: Llama-3's
//                   <|begin_of_text|>), ByteLevel (offsets only), Sequence of those, or null
//   decoder         ByteLevel (characters back to bytes; invalid UTF-8 becomes U+FFFD)
// Anything else is an error naming the file and the field. `truncation` and `padding` are
// ignored, as transformers overrides them on every call.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "llm/text/tokenizer.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// Whether `j` (a parsed tokenizer.json) is a byte-level BPE; otherwise `why` says what it is
// ("model.type is \"Unigram\"", "the pre_tokenizer has no ByteLevel step (Metaspace: SentencePiece-style)").
bool is_byte_level_bpe(const nlohmann::json& j, std::string* why);

// Builds the tokenizer from a parsed tokenizer.json; `path` names it in errors.
StatusOr<std::unique_ptr<Tokenizer>> make_tokenizer_json(const nlohmann::json& j, const std::string& path);

// Reads and builds `path`.
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path);

}  // namespace tunableop::llm
