#include "llm/text/tokenizer.h"

#include <filesystem>

#include "llm/text/json_file.h"
#include "llm/text/tokenizer_json.h"
#include "llm/text/utf8.h"

namespace tunableop::llm {

namespace {

// tokenizer_config.json's "added_tokens_decoder" ({"128000": {"content": "<|begin_of_text|>", ...}})
// must name the tokens tokenizer.json has under those ids.
Status check_added_tokens_decoder(const std::string& dir, const Tokenizer& tok) {
  auto cfg = read_optional_json_object(dir, "tokenizer_config.json");
  if (!cfg.is_ok()) return cfg.status();
  if (!*cfg || !(*cfg)->contains("added_tokens_decoder")) return Status::ok();
  const std::string where = dir + "/tokenizer_config.json: added_tokens_decoder";
  const nlohmann::json& dec = (*cfg)->at("added_tokens_decoder");
  if (!dec.is_object()) return Status::parse_error(where + ": must be an object of id -> token");
  for (const auto& [key, entry] : dec.items()) {
    const std::string at = where + "[\"" + utf8::excerpt(key) + "\"]";
    int64_t id = -1;
    try {
      size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size()) id = -1;
    } catch (const std::exception&) {
    }
    if (id < 0 || id > INT32_MAX) return Status::parse_error(at + ": the key is not a token id");
    if (!entry.is_object() || !entry.contains("content") || !entry.at("content").is_string()) {
      return Status::parse_error(at + ".content: must be a string");
    }
    const std::string content = entry.at("content").get<std::string>();
    const auto known = tok.piece_id(content);
    if (!known || *known != int32_t(id)) {
      return Status::parse_error(at + ": \"" + utf8::excerpt(content) + "\" is " +
                                 (known ? "id " + std::to_string(*known) : std::string("not a token")) + " in " + dir +
                                 "/tokenizer.json");
    }
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string json_path = model_dir + "/tokenizer.json", spm_path = model_dir + "/tokenizer.model";
  std::error_code ec;
  const bool has_spm = fs::exists(spm_path, ec);
  std::string not_byte_level;
  if (fs::exists(json_path, ec)) {
    auto j = read_json_object(json_path);
    if (!j.is_ok()) return j.status();
    if (is_byte_level_bpe(*j, &not_byte_level)) {
      auto tok = make_tokenizer_json(*j, json_path);
      if (!tok.is_ok()) return tok.status();
      TUNABLEOP_RETURN_IF_ERROR(check_added_tokens_decoder(model_dir, **tok));
      return tok;
    }
    if (!has_spm) {
      return Status::unsupported(json_path + ": not a byte-level BPE tokenizer (" + not_byte_level +
                                 "), and there is no tokenizer.model to read instead; prompts given as ids "
                                 "(--prompt-ids) need no tokenizer");
    }
  }
  if (!has_spm) {
    return Status::not_found(model_dir +
                             ": has neither tokenizer.json nor tokenizer.model, which text prompts need; prompts "
                             "given as ids (--prompt-ids) need no tokenizer");
  }
  if (!tokenizer_available()) {
    return Status::unsupported(spm_path +
                               ": this build has no SentencePiece, so text prompts cannot be tokenized (install "
                               "libsentencepiece-dev and rebuild); prompts given as ids (--prompt-ids) still work");
  }
  return load_sentencepiece(spm_path);
}

}  // namespace tunableop::llm
