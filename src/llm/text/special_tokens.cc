#include "llm/text/special_tokens.h"

#include "llm/json_brief.h"
#include "llm/text/json_file.h"
#include "tunableop/checked_size.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tunableop::llm {

using json = nlohmann::json;

bool SpecialTokens::is_eos(int32_t id) const { return std::find(eos.begin(), eos.end(), id) != eos.end(); }

std::string SpecialTokens::describe() const {
  std::string s = bos ? "BOS " + std::to_string(*bos) + " (" + bos_source + ")" : std::string("no BOS");
  if (bos && !add_bos) s += " not prepended";
  if (eos.empty()) return s + ", no EOS";
  s += ", EOS ";
  for (size_t i = 0; i < eos.size(); ++i) s += (i ? "/" : "") + std::to_string(eos[i]);
  return s + " (" + eos_source + ")";
}

Status SpecialTokens::check(int64_t vocab_size) const {
  auto bad = [&](const char* what, int32_t id, const std::string& source) {
    return Status::invalid_argument(source + ": " + what + " id " + std::to_string(id) +
                                    " is outside the model's vocabulary of " + std::to_string(vocab_size));
  };
  if (bos && (*bos < 0 || *bos >= vocab_size)) return bad("BOS", *bos, bos_source);
  for (int32_t id : suffix) {
    if (id < 0 || id >= vocab_size) return bad("appended", id, "tokenizer.json");
  }
  for (int32_t id : eos) {
    if (id < 0 || id >= vocab_size) return bad("EOS", id, eos_source);
  }
  return Status::ok();
}

namespace {

StatusOr<std::optional<json>> read_json(const std::string& dir, const std::string& name) {
  return read_optional_json_object(dir, name);
}

// "eos_token_id": 2, [1, 107] or null/absent.
StatusOr<std::optional<std::vector<int32_t>>> ids_field(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || j.at(key).is_null()) return std::optional<std::vector<int32_t>>();
  const json& v = j.at(key);
  auto bad = [&] {
    return Status::parse_error(file + ": \"" + key + "\" must be a token id or a list of token ids (got " +
                               json_brief(v) + ")");
  };
  // One id or a list of them (the value is never copied: it may be nested arbitrarily deep).
  std::vector<int32_t> ids;
  auto add = [&](const json& e) {
    if (!e.is_number_integer()) return false;
    if (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(INT32_MAX)) return false;
    const int64_t id = e.get<int64_t>();
    if (id < 0 || id > INT32_MAX) return false;
    ids.push_back(int32_t(id));
    return true;
  };
  if (v.is_array()) {
    for (const json& e : v)
      if (!add(e)) return bad();
  } else if (!add(v)) {
    return bad();
  }
  return std::optional<std::vector<int32_t>>(std::move(ids));
}

// "bos_token": "<s>" or {"content": "<s>", ...} (an AddedToken), resolved to an id through the
// tokenizer or the file's own "added_tokens_decoder" {"1": {"content": "<s>"}}.
StatusOr<std::optional<int32_t>> piece_field(const json& j, const char* key, const std::string& file,
                                             const Tokenizer* tokenizer) {
  if (!j.contains(key) || j.at(key).is_null()) return std::optional<int32_t>();
  const json& v = j.at(key);
  std::string piece;
  if (v.is_string()) {
    piece = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v.at("content").is_string()) {
    piece = v.at("content").get<std::string>();
  } else {
    return Status::parse_error(file + ": \"" + key + "\" must be a string or an object with \"content\" (got " +
                               json_brief(v) + ")");
  }
  if (tokenizer) {
    if (auto id = tokenizer->piece_id(piece)) return std::optional<int32_t>(*id);
  }
  if (j.contains("added_tokens_decoder") && j.at("added_tokens_decoder").is_object()) {
    for (const auto& [id_text, tok] : j.at("added_tokens_decoder").items()) {
      const json* content = tok.is_object() && tok.contains("content") ? &tok.at("content") : nullptr;
      if (content && content->is_string() && content->get_ref<const std::string&>() == piece) {
        // The whole key, in range: std::stol read "3abc" as 3, and an int32 cast made
        // "4294967297" the id 1 (issue 33).
        int64_t id = 0;
        if (!parse_int64(id_text, &id, 0, INT32_MAX))
          return Status::parse_error(file + ": added_tokens_decoder key \"" + id_text +
                                     "\" is not a token id (a whole number from 0 to 2^31 - 1)");
        return std::optional<int32_t>(int32_t(id));
      }
    }
  }
  if (!tokenizer) return std::optional<int32_t>();  // cannot resolve without the vocabulary
  return Status::invalid_argument(file + ": \"" + key + "\" is \"" + piece +
                                  "\", which is neither a token of the tokenizer nor in added_tokens_decoder");
}

}  // namespace

StatusOr<SpecialTokens> load_special_tokens(const std::string& dir, const Tokenizer* tokenizer) {
  const std::string tok_name = "tokenizer_config.json", gen_name = "generation_config.json", cfg_name = "config.json";
  auto tok_cfg = read_json(dir, tok_name);
  if (!tok_cfg.is_ok()) return tok_cfg.status();
  auto gen_cfg = read_json(dir, gen_name);
  if (!gen_cfg.is_ok()) return gen_cfg.status();
  auto model_cfg = read_json(dir, cfg_name);
  if (!model_cfg.is_ok()) return model_cfg.status();

  SpecialTokens s;
  bool add_bos_given = false;
  // BOS: the tokenizer's view first (it is what prepends it), then the model's.
  if (*tok_cfg) {
    const json& j = **tok_cfg;
    auto bos = piece_field(j, "bos_token", dir + "/" + tok_name, tokenizer);
    if (!bos.is_ok()) return bos.status();
    if (*bos) s.bos = **bos, s.bos_source = tok_name;
    if (j.contains("add_bos_token") && !j.at("add_bos_token").is_null()) {
      if (!j.at("add_bos_token").is_boolean()) {
        return Status::parse_error(dir + "/" + tok_name + ": \"add_bos_token\" must be true or false");
      }
      s.add_bos = j.at("add_bos_token").get<bool>();
      add_bos_given = true;
    }
  }
  for (const auto& [file, name] : {std::pair{&*gen_cfg, gen_name}, std::pair{&*model_cfg, cfg_name}}) {
    if (s.bos || !*file) continue;
    auto ids = ids_field(**file, "bos_token_id", dir + "/" + name);
    if (!ids.is_ok()) return ids.status();
    if (*ids && !(*ids)->empty()) s.bos = (*ids)->front(), s.bos_source = name;
  }
  if (!s.bos && tokenizer && tokenizer->bos_id()) s.bos = *tokenizer->bos_id(), s.bos_source = "tokenizer.model";
  // A tokenizer.json's post-processor says what a text gets (transformers encodes through it):
  // Llama-3's <|begin_of_text|>, nothing for Qwen. tokenizer_config.json's add_bos_token, when
  // given, still decides whether BOS goes first, as transformers' Llama tokenizers honour it.
  if (tokenizer) {
    if (auto tp = tokenizer->post_processor()) {
      if (tp->prefix.size() > 1) {
        return Status::unsupported(dir + "/tokenizer.json: post_processor puts " + std::to_string(tp->prefix.size()) +
                                   " tokens before the text; only one (a BOS) is supported");
      }
      if (!tp->prefix.empty()) s.bos = tp->prefix.front(), s.bos_source = "tokenizer.json";
      if (!add_bos_given) s.add_bos = !tp->prefix.empty();
      s.suffix = tp->suffix;
    }
  }

  // EOS: what generate() stops on first.
  bool have_eos = false;
  for (const auto& [file, name] : {std::pair{&*gen_cfg, gen_name}, std::pair{&*model_cfg, cfg_name}}) {
    if (have_eos || !*file) continue;
    auto ids = ids_field(**file, "eos_token_id", dir + "/" + name);
    if (!ids.is_ok()) return ids.status();
    if (*ids) s.eos = **ids, s.eos_source = name, have_eos = true;
  }
  if (!have_eos && *tok_cfg) {
    auto eos = piece_field(**tok_cfg, "eos_token", dir + "/" + tok_name, tokenizer);
    if (!eos.is_ok()) return eos.status();
    if (*eos) s.eos = {**eos}, s.eos_source = tok_name, have_eos = true;
  }
  if (!have_eos && tokenizer && tokenizer->eos_id()) s.eos = {*tokenizer->eos_id()}, s.eos_source = "tokenizer.model";
  return s;
}

StatusOr<std::vector<int32_t>> encode_prompt(const Tokenizer& tokenizer, const SpecialTokens& special,
                                             std::string_view text) {
  std::vector<int32_t> ids;
  if (special.add_bos) {
    if (!special.bos) {
      return Status::invalid_argument(
          "the model's prompts start with BOS, but no BOS id was found (tokenizer_config.json, "
          "generation_config.json, config.json, tokenizer.model)");
    }
    ids.push_back(*special.bos);
  }
  auto body = tokenizer.encode(text);
  if (!body.is_ok()) return body.status();
  ids.insert(ids.end(), body->begin(), body->end());
  ids.insert(ids.end(), special.suffix.begin(), special.suffix.end());
  if (ids.empty()) return Status::invalid_argument("the prompt is empty (and the model adds no BOS)");
  return ids;
}

}  // namespace tunableop::llm
