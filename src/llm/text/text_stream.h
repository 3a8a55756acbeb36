// Printing tokens as they are generated. Decoding token by token is wrong twice over: a
// SentencePiece piece's leading "▁" becomes a space only when something precedes it in the same
// decode call (the first piece's is dropped as the dummy prefix), and a character outside the
// vocabulary arrives as 2 to 4 byte-fallback tokens, each meaningless alone. So the stream decodes
// its context and everything generated so far in one call, emits what extends the text already
// emitted, and holds back a tail that ends in U+FFFD (an incomplete UTF-8 sequence) until the
// next token completes it or finish() is called.
//
// The concatenation of everything put() and finish() return equals decode(context + ids) minus
// decode(context): what a one-shot decode gives, cut wherever the stream was read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/text/tokenizer.h"

namespace tunableop::llm {

class TextStream {
 public:
  // `context`: ids before the streamed ones (the prompt's last few), decoded for their effect on
  // the first new piece (its leading space) but never emitted. It must end on a character
  // boundary, as any encoded text does.
  explicit TextStream(const Tokenizer& tokenizer, std::vector<int32_t> context = {});

  // Adds one generated id; returns the text that is now complete (possibly empty).
  StatusOr<std::string> put(int32_t id);
  // Returns whatever is still held back (an incomplete UTF-8 tail decodes to U+FFFD here, as in
  // a one-shot decode). put() may be called again afterwards.
  StatusOr<std::string> finish();

  const std::string& emitted() const { return emitted_; }
  const std::vector<int32_t>& ids() const { return generated_; }

  // How many prompt ids to pass as context: enough for SentencePiece's space handling.
  static constexpr size_t kContextTokens = 4;
  static std::vector<int32_t> context_of(const std::vector<int32_t>& prompt);

 private:
  StatusOr<std::string> take(bool hold_incomplete);
  const Tokenizer& tokenizer_;
  std::vector<int32_t> all_;        // context + generated
  std::vector<int32_t> generated_;  // generated only
  size_t context_bytes_ = 0;        // size of decode(context)
  Status context_status_;
  std::string emitted_;
};

// The text `generated` adds after `prompt` (its leading space kept): what a TextStream fed all
// of it emits.
StatusOr<std::string> decode_continuation(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& generated);

// True when `s` ends with U+FFFD, SentencePiece's stand-in for bytes that are not (yet) UTF-8.
bool ends_with_replacement_char(const std::string& s);

}  // namespace tunableop::llm
