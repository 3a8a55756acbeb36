// Builds without SentencePiece (CMake found no libsentencepiece-dev): no tokenizer.
#include "llm/text/tokenizer.h"

namespace tunableop::llm {

bool tokenizer_available() { return false; }

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path) {
  return Status::unsupported(path + ": this build has no SentencePiece (install libsentencepiece-dev and rebuild)");
}

}  // namespace tunableop::llm
