// What `tunableop llm` refuses before it allocates or overwrites anything (issue 33, finding 5
// and 6): a prompt text that no model position count could hold or whose tokenizing alone would
// not fit the memory available, an interactive line without end (`--interactive < /dev/zero`),
// and a --save-model target that is the model being read or holds another model.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>

#include "llm/random_model.h"
#include "tunableop/status.h"

namespace tunableop::cli {

// SentencePiece pieces are at most 16 characters (64 bytes of UTF-8), and tokenizer.json
// vocabularies' longer pieces (runs of spaces, say) never make a text average 64 bytes a token,
// so a text of more than 64 x max_positions bytes has more tokens than the model has positions;
// and tokenizing takes
// about 4.6 KB of memory per input byte (measured on a 10 MB line, issue 33), counted here as
// kTokenizerBytesPerByte against the memory available now.
inline constexpr int64_t kMaxBytesPerToken = 64;
inline constexpr int64_t kTokenizerBytesPerByte = 5 * 1024;
// The longest text prompt (bytes) for a model of `max_positions` positions on this machine.
int64_t max_prompt_bytes(int64_t max_positions);
// Ok, or InvalidArgument naming `what` ("--prompt 2", "--prompt-file x.txt line 3"), the size
// and the limit.
Status check_prompt_text(std::string_view text, int64_t max_positions, const std::string& what);

// Standard input for --interactive, one line at most `max_line` bytes: a longer line (or bytes
// that never end a line) stops the input there, as an end of input would, and too_long() says
// so. Reading stays in the caller's stream; nothing beyond the limit is buffered.
class LineLimitedInput {
 public:
  LineLimitedInput(std::istream& in, int64_t max_line);
  ~LineLimitedInput();
  std::istream& stream();
  bool too_long() const;

 private:
  class Buf;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::istream> stream_;
};

// Ok when `out` may receive --save-model: not the model directory read (`model`), and not a
// directory that already holds a model (config.json or a .safetensors file) unless `overwrite`.
Status check_save_model_target(const std::string& out, const llm::ModelSpec& model, bool overwrite);

}  // namespace tunableop::cli
