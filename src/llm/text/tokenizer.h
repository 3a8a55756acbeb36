// Text <-> token ids for `tunableop llm`: a model directory's SentencePiece `tokenizer.model`
// (Llama-2, Gemma), read with the SentencePiece library. SentencePiece is an optional build
// dependency: without it load_tokenizer() says so, and prompts given as ids still work.
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
  // first piece is dropped (the dummy prefix), bytes that do not form valid UTF-8 become U+FFFD.
  virtual StatusOr<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // The id of a piece spelled exactly (e.g. "<s>" from tokenizer_config.json), if it exists.
  virtual std::optional<int32_t> piece_id(std::string_view piece) const = 0;
  // BOS and EOS as the model file declares them (none when it says -1).
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // "sentencepiece bpe, 32000 pieces, byte fallback (DIR/tokenizer.model)"
  virtual std::string description() const = 0;
};

// Whether this build reads SentencePiece models.
bool tokenizer_available();

// Reads `path` (a SentencePiece model file).
StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path);

// Reads DIR/tokenizer.model. Errors name what is missing: SentencePiece in this build, or the
// file (mentioning a tokenizer.json that is there but not supported).
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_dir);

}  // namespace tunableop::llm
