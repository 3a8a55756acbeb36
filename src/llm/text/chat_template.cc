#include "llm/text/chat_template.h"

#include <filesystem>

#include "llm/text/json_file.h"
#include "llm/text/utf8.h"
#include "tunableop/safe_file.h"

namespace tunableop::llm {

namespace {

using json = nlohmann::json;

// tokenizer_config.json's special tokens: "<s>" or {"content": "<s>", ...}; null ones are left out.
StatusOr<jinja::Dict> special_tokens_of(const json& cfg, const std::string& file) {
  jinja::Dict d;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!cfg.contains(key) || cfg.at(key).is_null()) continue;
    const json& v = cfg.at(key);
    if (v.is_string()) {
      d.set(key, jinja::Value(v.get<std::string>()));
    } else if (v.is_object() && v.contains("content") && v.at("content").is_string()) {
      d.set(key, jinja::Value(v.at("content").get<std::string>()));
    } else {
      return Status::parse_error(file + ": \"" + key + "\" must be a string or an object with \"content\"");
    }
  }
  if (cfg.contains("additional_special_tokens") && cfg.at("additional_special_tokens").is_array()) {
    jinja::List l;
    for (const json& v : cfg.at("additional_special_tokens")) {
      if (v.is_string()) l.emplace_back(v.get<std::string>());
      if (v.is_object() && v.contains("content") && v.at("content").is_string())
        l.emplace_back(v.at("content").get<std::string>());
    }
    d.set("additional_special_tokens", jinja::Value(std::move(l)));
  }
  return d;
}

}  // namespace

StatusOr<ChatTemplate> make_chat_template(const std::string& text, const std::string& source_name,
                                          jinja::Dict special_tokens) {
  auto compiled = jinja::Template::parse(text, source_name);
  if (!compiled.is_ok()) return compiled.status();
  return ChatTemplate{std::move(*compiled), source_name, std::move(special_tokens)};
}

StatusOr<ChatTemplate> load_chat_template(const std::string& dir, const std::string& name) {
  const std::string cfg_file = dir + "/tokenizer_config.json";
  auto cfg = read_optional_json_object(dir, "tokenizer_config.json");
  if (!cfg.is_ok()) return cfg.status();
  jinja::Dict special;
  if (*cfg) {
    auto s = special_tokens_of(**cfg, cfg_file);
    if (!s.is_ok()) return s.status();
    special = std::move(*s);
  }
  const std::string jinja_file = dir + "/chat_template.jinja";
  std::error_code ec;
  if (std::filesystem::exists(jinja_file, ec)) {
    auto text = read_regular_file(jinja_file);
    if (!text.is_ok()) return text.status();
    return make_chat_template(*text, jinja_file, std::move(special));
  }
  if (!*cfg || !(*cfg)->contains("chat_template") || (*cfg)->at("chat_template").is_null()) {
    return Status::not_found(dir + ": no chat template (neither chat_template.jinja nor \"chat_template\" in " +
                             "tokenizer_config.json); a base model has none: use --prompt without --chat");
  }
  const json& t = (*cfg)->at("chat_template");
  const std::string field = cfg_file + ": chat_template";
  if (t.is_string()) return make_chat_template(t.get<std::string>(), field, std::move(special));
  if (!t.is_array()) {
    return Status::parse_error(field + ": must be a string or a list of {\"name\": ..., \"template\": ...}");
  }
  std::string names;
  for (size_t i = 0; i < t.size(); ++i) {
    const json& e = t[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("name") || !e.at("name").is_string() || !e.contains("template") ||
        !e.at("template").is_string()) {
      return Status::parse_error(at + ": must be {\"name\": \"...\", \"template\": \"...\"}");
    }
    const std::string n = e.at("name").get<std::string>();
    if (n == name)
      return make_chat_template(e.at("template").get<std::string>(), field + "[\"" + n + "\"]", std::move(special));
    names += (names.empty() ? "" : ", ") + utf8::excerpt(n, 40);
  }
  return Status::not_found(field + ": no template named \"" + utf8::excerpt(name, 40) + "\" (it has: " + names + ")");
}

StatusOr<std::string> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt) {
  jinja::List list;
  // A conversation is text: bytes that are not UTF-8 (a terminal in Latin-1) are named here
  // rather than rendered into a prompt the tokenizer would read differently.
  auto check = [](size_t i, const char* field, const std::string& text) {
    const size_t bad = utf8::first_invalid(text);
    if (bad == std::string::npos) return Status::ok();
    return Status::invalid_argument("message " + std::to_string(i + 1) + "'s " + field +
                                    " is not valid UTF-8 (the byte at offset " + std::to_string(bad) + ")");
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    TUNABLEOP_RETURN_IF_ERROR(check(i, "role", m.role));
    TUNABLEOP_RETURN_IF_ERROR(check(i, "content", m.content));
    jinja::Dict d;
    d.items = {{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}};
    list.emplace_back(std::move(d));
  }
  jinja::Dict context = chat_template.special_tokens;
  context.set("messages", jinja::Value(std::move(list)));
  context.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  context.set("tools", jinja::Value::none());
  context.set("documents", jinja::Value::none());
  return chat_template.compiled.render(context);
}

}  // namespace tunableop::llm
