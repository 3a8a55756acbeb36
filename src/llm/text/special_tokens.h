// BOS and EOS of a Hugging Face model directory: which id starts a prompt, and which ids end
// generation. Hugging Face spreads them over three JSON files and the tokenizer; the order in
// which they are read (the first that has the value wins):
//
//   With a tokenizer.json, its post_processor decides: the BOS it puts first, or none (Qwen);
//   and the tokens it appends. tokenizer_config.json's add_bos_token, when given, overrides
//   whether BOS goes first. Otherwise (SentencePiece):
//   BOS (prepended to a text prompt; it is the tokenizer that adds it in transformers):
//     tokenizer_config.json "bos_token" (a piece such as "<s>", looked up in the tokenizer),
//     generation_config.json "bos_token_id", config.json "bos_token_id", tokenizer.model's BOS.
//   Whether to prepend it: tokenizer_config.json "add_bos_token"; absent -> yes (Llama and
//   Gemma both start every prompt with BOS).
//   EOS (stops generation; it is generate() that stops in transformers, reading its
//   generation config, which is made from config.json when the file is absent):
//     generation_config.json "eos_token_id", config.json "eos_token_id" (an id or a list of
//     ids: Gemma's instruction-tuned models stop at <eos> or <end_of_turn>),
//     tokenizer_config.json "eos_token", tokenizer.model's EOS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llm/text/tokenizer.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct SpecialTokens {
  std::optional<int32_t> bos;
  bool add_bos = true;
  std::vector<int32_t> eos;            // any of them stops a sequence; may be empty
  std::string bos_source, eos_source;  // the file (or "tokenizer.model") each came from
  std::vector<int32_t> suffix;         // appended to a text prompt (tokenizer.json's post_processor)

  bool is_eos(int32_t id) const;
  // "BOS 1 (tokenizer_config.json), EOS 2 (generation_config.json)"
  std::string describe() const;
  // Every id below vocab_size (the model's); the message names the file the id came from.
  Status check(int64_t vocab_size) const;
};

// Reads DIR's JSON files (those present; a file that is there but broken is an error naming it)
// and, when given, the tokenizer (to resolve "<s>"-style pieces and as the last fallback).
// Without a tokenizer, piece names in tokenizer_config.json are skipped.
StatusOr<SpecialTokens> load_special_tokens(const std::string& model_dir, const Tokenizer* tokenizer);

// `text` as the model expects a prompt: BOS (when add_bos) + the tokenizer's ids + suffix. An
// empty text gives BOS alone; without BOS an empty prompt is an error. Not for a rendered chat
// template, which writes its own BOS (chat_template.h).
StatusOr<std::vector<int32_t>> encode_prompt(const Tokenizer& tokenizer, const SpecialTokens& special,
                                             std::string_view text);

}  // namespace tunableop::llm
