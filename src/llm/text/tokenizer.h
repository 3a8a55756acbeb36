// Text <-> token ids for `tunableop llm`: what a model directory ships. A byte-level BPE
// `tokenizer.json` (Llama-3, Qwen, Mistral's tekken-era releases: tokenizer_json.h, read by our
// own code with PCRE2 for its split regex), or a SentencePiece `tokenizer.model` (Llama-2,
// Gemma, Mistral v0.3), read with the SentencePiece library. Both libraries are optional build
// dependencies: without one, load_tokenizer() says which is missing, and prompts given as ids
// still work.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Number of pieces (ids 0 .. vocab_size - 1).
  virtual int64_t vocab_size() const = 0;
  // The ids of `text` as the model file says (normalisation, dummy prefix, byte fallback); no
  // BOS or EOS is added here (see encode_prompt).
  virtual StatusOr<std::vector<int32_t>> encode(std::string_view text) const = 0;
  // The text of `ids`: control tokens (BOS, EOS) decode to nothing, the leading space of the
  // first piece is dropped (SentencePiece's dummy prefix), bytes that do not form valid UTF-8
  // become U+FFFD. An id outside the vocabulary is an error for SentencePiece and decodes to
  // nothing for tokenizer.json (as `tokenizers` does: a model's padded rows).
  virtual StatusOr<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // The id of a piece spelled exactly (e.g. "<s>" from tokenizer_config.json), if it exists.
  virtual std::optional<int32_t> piece_id(std::string_view piece) const = 0;
  // BOS and EOS as the model file declares them (none when it says -1).
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // "sentencepiece bpe, 32000 pieces, byte fallback (DIR/tokenizer.model)"
  virtual std::string description() const = 0;

  // What the tokenizer file itself puts around one text when special tokens are added
  // (tokenizer.json's post_processor: Llama-3's <|begin_of_text|> before, Qwen's nothing).
  // nullopt when the file has no say (SentencePiece: the JSON files decide, special_tokens.h).
  struct Template {
    std::vector<int32_t> prefix, suffix;
  };
  virtual std::optional<Template> post_processor() const { return std::nullopt; }
};

// Whether this build reads SentencePiece models.
bool tokenizer_available();

// Reads `path` (a SentencePiece model file).
StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path);

// The tokenizer DIR ships, chosen as transformers chooses (it reads tokenizer.json whenever the
// directory has one):
//   tokenizer.json, a byte-level BPE          -> read (tokenizer_json.h), tokenizer.model or not;
//   tokenizer.json of another kind (the SentencePiece-style conversion Llama-2, Mistral v0.3 and
//     Gemma ship beside their tokenizer.model)  -> tokenizer.model, through SentencePiece: the
//     conversion exists to give its ids;
//   tokenizer.model alone                     -> SentencePiece.
// A tokenizer_config.json "added_tokens_decoder" that disagrees with tokenizer.json is an error.
// Errors name the file and what is missing (a library in this build, the file, the field).
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_dir);

}  // namespace tunableop::llm
