#include "llm/text/tokenizer.h"

#include <filesystem>

#include "llm/text/added_tokens.h"
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

// A SentencePiece tokenizer whose directory lists added tokens (tokenizer_config.json's
// added_tokens_decoder: <bos>, <start_of_turn>, [INST], ...): transformers reads the directory's
// tokenizer.json, which matches them in text before anything else, so a rendered chat's markers
// become their ids. SentencePiece alone would spell a control token such as <bos> out as text.
// The text between them is encoded by SentencePiece, one piece at a time, which adds its dummy
// prefix to each piece, as the tokenizer.json of Llama-2 (Prepend normalizer) and Gemma (no
// prefix at all) do. Where tokenizer.json prefixes only the text's start (Metaspace
// prepend_scheme "first": Mistral v0.3), text after an added token cannot be encoded alike, and
// is refused rather than given other ids.
class SentencePieceWithAddedTokens final : public Tokenizer {
 public:
  SentencePieceWithAddedTokens(std::unique_ptr<Tokenizer> inner, std::unique_ptr<AddedTokenSplitter> splitter,
                               size_t count, std::string prefix_first_only)
      : inner_(std::move(inner)),
        splitter_(std::move(splitter)),
        count_(count),
        prefix_first_only_(std::move(prefix_first_only)) {}

  int64_t vocab_size() const override { return inner_->vocab_size(); }
  StatusOr<std::vector<int32_t>> encode(std::string_view text) const override {
    auto pieces = splitter_->split(text, nullptr);
    if (!pieces.is_ok()) return pieces.status();
    std::vector<int32_t> ids;
    bool first = true;
    for (const auto& p : *pieces) {
      if (p.id >= 0) {
        ids.push_back(p.id);
      } else {
        if (!first && !prefix_first_only_.empty()) {
          return Status::unsupported(prefix_first_only_ +
                                     ": its tokenizer puts the SentencePiece dummy prefix only at the start of the "
                                     "text (Metaspace prepend_scheme \"first\"), which SentencePiece cannot do for "
                                     "text after a special token; such prompts (a rendered chat) are not supported "
                                     "for it yet");
        }
        auto part = inner_->encode(p.text);
        if (!part.is_ok()) return part.status();
        ids.insert(ids.end(), part->begin(), part->end());
      }
      first = false;
    }
    return ids;
  }
  StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override { return inner_->decode(ids); }
  std::optional<int32_t> piece_id(std::string_view piece) const override { return inner_->piece_id(piece); }
  std::optional<int32_t> bos_id() const override { return inner_->bos_id(); }
  std::optional<int32_t> eos_id() const override { return inner_->eos_id(); }
  std::string description() const override {
    return inner_->description() + ", " + std::to_string(count_) + " added tokens matched in text";
  }

 private:
  std::unique_ptr<Tokenizer> inner_;
  std::unique_ptr<AddedTokenSplitter> splitter_;
  size_t count_;
  std::string prefix_first_only_;  // the directory, when its tokenizer prefixes only the start
};

// tokenizer_config.json's added tokens, for a SentencePiece directory; none when it lists none.
StatusOr<std::vector<AddedToken>> config_added_tokens(const std::string& dir, const Tokenizer& tok) {
  std::vector<AddedToken> out;
  auto cfg = read_optional_json_object(dir, "tokenizer_config.json");
  if (!cfg.is_ok()) return cfg.status();
  if (!*cfg || !(*cfg)->contains("added_tokens_decoder")) return out;
  const std::string where = dir + "/tokenizer_config.json: added_tokens_decoder";
  const nlohmann::json& dec = (*cfg)->at("added_tokens_decoder");
  if (!dec.is_object()) return Status::parse_error(where + ": must be an object of id -> token");
  for (const auto& item : dec.items()) {
    const std::string& key = item.key();
    const nlohmann::json& e = item.value();  // a plain reference: lambdas below capture it
    const std::string at = where + "[\"" + utf8::excerpt(key) + "\"]";
    if (!e.is_object() || !e.contains("content") || !e.at("content").is_string() ||
        e.at("content").get<std::string>().empty()) {
      return Status::parse_error(at + ".content: must be a non-empty string");
    }
    AddedToken t;
    t.content = e.at("content").get<std::string>();
    const auto id = tok.piece_id(t.content);
    if (!id || std::to_string(*id) != key) {
      return Status::parse_error(at + ": \"" + utf8::excerpt(t.content) + "\" is " +
                                 (id ? "id " + std::to_string(*id) : std::string("not a piece")) + " in " + dir +
                                 "/tokenizer.model");
    }
    t.id = *id;
    auto flag = [&](const char* name) { return e.contains(name) && e.at(name).is_boolean() && e.at(name).get<bool>(); };
    t.special = flag("special"), t.lstrip = flag("lstrip"), t.rstrip = flag("rstrip");
    t.single_word = flag("single_word");
    out.push_back(std::move(t));
  }
  return out;
}

// Whether the directory's tokenizer (as transformers builds it) prefixes only the text's start:
// tokenizer.json's Metaspace with prepend_scheme "first", or, without a tokenizer.json, a Llama
// tokenizer_config.json with legacy false (what transformers converts it to).
bool prefixes_first_only(const std::string& dir, const nlohmann::json* tokenizer_json) {
  if (tokenizer_json) {
    const nlohmann::json pre = tokenizer_json->value("pre_tokenizer", nlohmann::json());
    std::vector<nlohmann::json> steps = {pre};
    if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
        pre.at("pretokenizers").is_array()) {
      steps.assign(pre.at("pretokenizers").begin(), pre.at("pretokenizers").end());
    }
    for (const auto& p : steps) {
      if (p.is_object() && p.value("type", "") == "Metaspace" && p.value("prepend_scheme", "") == "first") return true;
    }
    return false;
  }
  auto cfg = read_optional_json_object(dir, "tokenizer_config.json");
  return cfg.is_ok() && *cfg && (*cfg)->contains("legacy") && (*cfg)->at("legacy").is_boolean() &&
         !(*cfg)->at("legacy").get<bool>();
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string json_path = model_dir + "/tokenizer.json", spm_path = model_dir + "/tokenizer.model";
  std::error_code ec;
  const bool has_spm = fs::exists(spm_path, ec);
  std::string not_byte_level;
  std::optional<nlohmann::json> tokenizer_json;
  if (fs::exists(json_path, ec)) {
    auto j = read_json_object(json_path);
    if (!j.is_ok()) return j.status();
    tokenizer_json = *j;
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
  auto spm = load_sentencepiece(spm_path);
  if (!spm.is_ok()) return spm.status();
  auto added = config_added_tokens(model_dir, **spm);
  if (!added.is_ok()) return added.status();
  if (added->empty()) return spm;
  auto splitter = AddedTokenSplitter::build(*added, nullptr, model_dir + "/tokenizer_config.json");
  if (!splitter.is_ok()) return splitter.status();
  const bool first_only = prefixes_first_only(model_dir, tokenizer_json ? &*tokenizer_json : nullptr);
  return std::unique_ptr<Tokenizer>(new SentencePieceWithAddedTokens(std::move(*spm), std::move(*splitter),
                                                                     added->size(), first_only ? model_dir : ""));
}

}  // namespace tunableop::llm
