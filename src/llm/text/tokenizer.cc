#include "llm/text/tokenizer.h"

#include <filesystem>

namespace tunableop::llm {

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string path = model_dir + "/tokenizer.model";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    std::string msg = path + ": not found; text prompts need the model's SentencePiece tokenizer.model";
    if (fs::exists(model_dir + "/tokenizer.json", ec)) {
      msg += " (this directory has only a tokenizer.json, which is not supported)";
    }
    return Status::not_found(msg + "; prompts given as ids (--prompt-ids) need no tokenizer");
  }
  if (!tokenizer_available()) {
    return Status::unsupported(path +
                               ": this build has no SentencePiece, so text prompts cannot be tokenized (install "
                               "libsentencepiece-dev and rebuild); prompts given as ids (--prompt-ids) still work");
  }
  return load_sentencepiece(path);
}

}  // namespace tunableop::llm
