#include "llm/text/tokenizer_json.h"

#include <unordered_map>

#include "llm/text/added_tokens.h"
#include "llm/text/bpe_model.h"
#include "llm/text/byte_level.h"
#include "llm/text/json_file.h"
#include "llm/text/normalizer.h"
#include "llm/text/pre_tokenizer.h"
#include "llm/text/utf8.h"

namespace tunableop::llm {

namespace {

using json = nlohmann::json;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j.at("type").is_string() ? j.at("type").get<std::string>() : "";
}

bool has_byte_level_step(const json& pre) {
  const std::string type = type_of(pre);
  if (type == "ByteLevel") return true;
  if (type == "Sequence" && pre.contains("pretokenizers") && pre.at("pretokenizers").is_array()) {
    for (const json& p : pre.at("pretokenizers")) {
      if (type_of(p) == "ByteLevel") return true;  // one level: Sequences are flat in practice
    }
  }
  return false;
}

// "model.vocab" etc. as "FILE: model.vocab".
struct Where {
  const std::string& file;
  std::string operator()(const std::string& field) const { return file + ": " + field; }
};

StatusOr<bool> bool_at(const json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_boolean()) return Status::parse_error(where + "." + key + ": must be true or false");
  return j.at(key).get<bool>();
}

StatusOr<int32_t> id_at(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return Status::parse_error(where + ": must be a token id (an integer 0 .. 2^31-1), got " + utf8::excerpt(v.dump()));
  }
  return int32_t(v.get<int64_t>());
}

StatusOr<std::unique_ptr<BpeModel>> make_model(const json& m, const Where& where) {
  if (!m.is_object()) return Status::parse_error(where("model") + ": must be an object");
  const std::string type = type_of(m);
  if (!type.empty() && type != "BPE") {
    return Status::unsupported(where("model.type") + ": \"" + utf8::excerpt(type) +
                               "\" is not supported (only BPE: byte-level BPE tokenizers)");
  }
  if (!m.contains("vocab") || !m.at("vocab").is_object()) {
    return Status::parse_error(where("model.vocab") + ": must be an object of token -> id");
  }
  if (!m.contains("merges") || !m.at("merges").is_array()) {
    return Status::parse_error(where("model.merges") + ": must be a list");
  }
  if (m.contains("dropout") && !m.at("dropout").is_null() &&
      !(m.at("dropout").is_number() && m.at("dropout").get<double>() == 0.0)) {
    return Status::unsupported(where("model.dropout") +
                               ": BPE dropout (a training-time randomisation) is not supported");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(affix) && !m.at(affix).is_null() &&
        !(m.at(affix).is_string() && m.at(affix).get<std::string>().empty())) {
      return Status::unsupported(where(std::string("model.") + affix) + ": not supported (byte-level BPE has none)");
    }
  }
  BpeModel::Vocab vocab;
  vocab.reserve(m.at("vocab").size());
  for (const auto& [tok, v] : m.at("vocab").items()) {
    auto id = id_at(v, where("model.vocab[\"" + utf8::excerpt(tok) + "\"]"));
    if (!id.is_ok()) return id.status();
    vocab.emplace(tok, *id);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& ml = m.at("merges");
  merges.reserve(ml.size());
  for (size_t i = 0; i < ml.size(); ++i) {
    const json& e = ml[i];
    const std::string at = where("model.merges[" + std::to_string(i) + "]");
    if (e.is_string()) {  // "a b" (tokenizers before 0.20)
      const std::string s = e.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size()) {
        return Status::parse_error(at + ": \"" + utf8::excerpt(s) + "\" is not two tokens separated by a space");
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"] (0.20+)
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return Status::parse_error(at + ": must be \"a b\" or [\"a\", \"b\"], got " + utf8::excerpt(e.dump()));
    }
  }
  BpeOptions o;
  auto ignore = bool_at(m, "ignore_merges", false, where("model"));
  auto fallback = bool_at(m, "byte_fallback", false, where("model"));
  auto fuse = bool_at(m, "fuse_unk", false, where("model"));
  for (const auto* b : {&ignore, &fallback, &fuse}) {
    if (!b->is_ok()) return b->status();
  }
  o.ignore_merges = *ignore, o.byte_fallback = *fallback, o.fuse_unk = *fuse;
  if (m.contains("unk_token") && !m.at("unk_token").is_null()) {
    if (!m.at("unk_token").is_string())
      return Status::parse_error(where("model.unk_token") + ": must be a string or null");
    auto it = vocab.find(m.at("unk_token").get<std::string>());
    if (it == vocab.end()) {
      return Status::parse_error(where("model.unk_token") + ": \"" +
                                 utf8::excerpt(m.at("unk_token").get<std::string>()) + "\" is not in model.vocab");
    }
    o.unk = it->second;
  }
  return BpeModel::build(std::move(vocab), merges, o, where.file);
}

StatusOr<std::vector<AddedToken>> added_tokens(const json& j, const Where& where) {
  std::vector<AddedToken> out;
  if (!j.contains("added_tokens") || j.at("added_tokens").is_null()) return out;
  const json& list = j.at("added_tokens");
  if (!list.is_array()) return Status::parse_error(where("added_tokens") + ": must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where("added_tokens[" + std::to_string(i) + "]");
    const json& e = list[i];
    if (!e.is_object()) return Status::parse_error(at + ": must be an object");
    AddedToken t;
    if (!e.contains("id")) return Status::parse_error(at + ".id: missing");
    auto id = id_at(e.at("id"), at + ".id");
    if (!id.is_ok()) return id.status();
    t.id = *id;
    if (!e.contains("content") || !e.at("content").is_string() || e.at("content").get<std::string>().empty()) {
      return Status::parse_error(at + ".content: must be a non-empty string");
    }
    t.content = e.at("content").get<std::string>();
    if (utf8::first_invalid(t.content) != std::string::npos)
      return Status::parse_error(at + ".content: not valid UTF-8");
    for (auto [key, field] : {std::pair{"special", &t.special}, std::pair{"lstrip", &t.lstrip},
                              std::pair{"rstrip", &t.rstrip}, std::pair{"single_word", &t.single_word}}) {
      auto b = bool_at(e, key, false, at);
      if (!b.is_ok()) return b.status();
      *field = *b;
    }
    auto normalized = bool_at(e, "normalized", !t.special, at);  // tokenizers' default: !special
    if (!normalized.is_ok()) return normalized.status();
    t.normalized = *normalized;
    out.push_back(std::move(t));
  }
  return out;
}

// TemplateProcessing's "single": the ids before and after the text ($A).
StatusOr<Tokenizer::Template> template_processing(const json& p, const std::string& where) {
  if (!p.contains("single") || !p.at("single").is_array())
    return Status::parse_error(where + ".single: must be a list");
  const json specials = p.value("special_tokens", json::object());
  if (!specials.is_object()) return Status::parse_error(where + ".special_tokens: must be an object");
  Tokenizer::Template t;
  bool seen_sequence = false;
  const json& single = p.at("single");
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    const json& item = single[i];
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_sequence) return Status::parse_error(at + ": a single-text template names its sequence once");
      seen_sequence = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item.at("SpecialToken").is_object() ||
        !item.at("SpecialToken").contains("id") || !item.at("SpecialToken").at("id").is_string()) {
      return Status::parse_error(at + ": must be {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": {...}}");
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    if (!specials.contains(name) || !specials.at(name).is_object() || !specials.at(name).contains("ids") ||
        !specials.at(name).at("ids").is_array()) {
      return Status::parse_error(at + ": special token \"" + utf8::excerpt(name) + "\" is not in " + where +
                                 ".special_tokens (with its \"ids\")");
    }
    for (const json& v : specials.at(name).at("ids")) {
      auto id = id_at(v, where + ".special_tokens[\"" + utf8::excerpt(name) + "\"].ids");
      if (!id.is_ok()) return id.status();
      (seen_sequence ? t.suffix : t.prefix).push_back(*id);
    }
  }
  if (!seen_sequence) return Status::parse_error(where + ".single: has no {\"Sequence\": ...} for the text");
  return t;
}

StatusOr<Tokenizer::Template> post_processor(const json& p, const std::string& where) {
  const std::string type = type_of(p);
  if (p.is_null()) return Tokenizer::Template{};
  if (type == "ByteLevel") return Tokenizer::Template{};  // offsets only
  if (type == "TemplateProcessing") return template_processing(p, where);
  if (type == "Sequence") {
    if (!p.contains("processors") || !p.at("processors").is_array()) {
      return Status::parse_error(where + ": a Sequence needs a \"processors\" list");
    }
    Tokenizer::Template all;
    const json& list = p.at("processors");
    for (size_t i = 0; i < list.size(); ++i) {
      if (type_of(list[i]) == "Sequence")
        return Status::unsupported(where + ".processors[" + std::to_string(i) + "]: a nested Sequence");
      auto t = post_processor(list[i], where + ".processors[" + std::to_string(i) + "]");
      if (!t.is_ok()) return t.status();
      all.prefix.insert(all.prefix.end(), t->prefix.begin(), t->prefix.end());
      all.suffix.insert(all.suffix.end(), t->suffix.begin(), t->suffix.end());
    }
    return all;
  }
  return Status::unsupported(where + ": post-processor type \"" + utf8::excerpt(type) +
                             "\" is not supported (TemplateProcessing, ByteLevel, Sequence, null)");
}

Status check_decoder(const json& d, const std::string& where) {
  const std::string type = type_of(d);
  if (type == "ByteLevel") return Status::ok();
  if (type == "Sequence" && d.contains("decoders") && d.at("decoders").is_array()) {
    const json& list = d.at("decoders");
    if (list.size() == 1 && type_of(list[0]) == "ByteLevel") return Status::ok();
  }
  return Status::unsupported(where + ": decoder " +
                             (type.empty() ? std::string("null") : "\"" + utf8::excerpt(type) + "\"") +
                             " is not supported with a byte-level BPE (ByteLevel is)");
}

class TokenizerJson final : public Tokenizer {
 public:
  std::string path;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre;
  std::unique_ptr<AddedTokenSplitter> splitter;
  std::unordered_map<int32_t, AddedToken> added;  // by id
  std::unordered_map<std::string, int32_t> added_ids;
  Template tmpl;
  int64_t size = 0;

  int64_t vocab_size() const override { return size; }

  StatusOr<std::vector<int32_t>> encode(std::string_view text) const override {
    if (const size_t bad = utf8::first_invalid(text); bad != std::string_view::npos) {
      return Status::invalid_argument("the text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    auto pieces = splitter->split(text, normalizer.get());
    if (!pieces.is_ok()) return pieces.status();
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    std::vector<std::string> words;
    for (auto& p : *pieces) {
      if (p.id >= 0) {
        ids.push_back(p.id);
        continue;
      }
      words.assign(1, std::move(p.text));
      TUNABLEOP_RETURN_IF_ERROR(pre->apply(words));
      for (const std::string& w : words) model->encode_word(w, ids);
    }
    return ids;
  }

  StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (int32_t id : ids) {
      std::string_view tok;
      if (auto it = added.find(id); it != added.end()) {
        if (it->second.special) continue;  // control tokens print as nothing
        tok = it->second.content;
      } else if (const std::string* t = model->token(id)) {
        tok = *t;
      } else {
        continue;  // an id the tokenizer lacks (a model's padded vocabulary): nothing, as `tokenizers` decodes it
      }
      // ByteLevel decoder: characters back to bytes; a token with other characters (an added
      // token with a space, say) stays as its UTF-8.
      if (!byte_level::decode(tok, bytes)) bytes.append(tok);
    }
    return utf8::lossy(bytes);
  }

  std::optional<int32_t> piece_id(std::string_view piece) const override {
    if (auto it = added_ids.find(std::string(piece)); it != added_ids.end()) return it->second;
    return model->id(piece);
  }
  std::optional<int32_t> bos_id() const override {
    return tmpl.prefix.empty() ? std::nullopt : std::optional<int32_t>(tmpl.prefix.front());
  }
  std::optional<int32_t> eos_id() const override { return std::nullopt; }
  std::optional<Template> post_processor() const override { return tmpl; }
  std::string description() const override {
    return "byte-level BPE, " + std::to_string(size) + " ids, " + std::to_string(model->merge_count()) + " merges, " +
           std::to_string(added.size()) + " added tokens" + (normalizer ? ", normalized" : "") + " (" + path + ")";
  }
};

}  // namespace

bool is_byte_level_bpe(const json& j, std::string* why) {
  auto say = [&](std::string s) {
    if (why) *why = std::move(s);
    return false;
  };
  if (!j.is_object() || !j.contains("model") || !j.at("model").is_object()) return say("it has no \"model\" object");
  const std::string type = type_of(j.at("model"));
  if (!type.empty() && type != "BPE") return say("its model.type is \"" + utf8::excerpt(type) + "\"");
  const json pre = j.value("pre_tokenizer", json());
  if (!has_byte_level_step(pre)) {
    const std::string pre_type = type_of(pre);
    return say("its pre_tokenizer has no ByteLevel step (" +
               (pre_type.empty() ? std::string("none") : "\"" + utf8::excerpt(pre_type) + "\"") +
               (pre_type == "Metaspace" ? ": a SentencePiece-style BPE" : "") + ")");
  }
  return true;
}

StatusOr<std::unique_ptr<Tokenizer>> make_tokenizer_json(const json& j, const std::string& path) {
  const Where where{path};
  std::string why;
  if (!is_byte_level_bpe(j, &why)) {
    return Status::unsupported(path + ": not a byte-level BPE tokenizer: " + why);
  }
  auto t = std::make_unique<TokenizerJson>();
  t->path = path;
  auto model = make_model(j.at("model"), where);
  if (!model.is_ok()) return model.status();
  t->model = std::move(*model);
  auto normalizer = make_normalizer(j.value("normalizer", json()), where("normalizer"));
  if (!normalizer.is_ok()) return normalizer.status();
  t->normalizer = std::move(*normalizer);
  auto pre = make_pre_tokenizer(j.at("pre_tokenizer"), where("pre_tokenizer"));
  if (!pre.is_ok()) return pre.status();
  t->pre = std::move(*pre);
  TUNABLEOP_RETURN_IF_ERROR(check_decoder(j.value("decoder", json()), where("decoder")));
  auto tmpl = post_processor(j.value("post_processor", json()), where("post_processor"));
  if (!tmpl.is_ok()) return tmpl.status();
  t->tmpl = *tmpl;

  auto added = added_tokens(j, where);
  if (!added.is_ok()) return added.status();
  int64_t size = t->model->id_bound();
  for (size_t i = 0; i < added->size(); ++i) {
    const AddedToken& a = (*added)[i];
    const std::string at = where("added_tokens[" + std::to_string(i) + "]");
    if (const std::string* tok = t->model->token(a.id); tok && *tok != a.content) {
      return Status::parse_error(at + ": id " + std::to_string(a.id) + " is \"" + utf8::excerpt(a.content) +
                                 "\" here but \"" + utf8::excerpt(*tok) + "\" in model.vocab");
    }
    if (auto it = t->added.find(a.id); it != t->added.end()) {
      return Status::parse_error(at + ": id " + std::to_string(a.id) + " is given to both \"" +
                                 utf8::excerpt(it->second.content) + "\" and \"" + utf8::excerpt(a.content) + "\"");
    }
    if (auto it = t->added_ids.find(a.content); it != t->added_ids.end()) {
      return Status::parse_error(at + ": \"" + utf8::excerpt(a.content) + "\" is added twice (ids " +
                                 std::to_string(it->second) + " and " + std::to_string(a.id) + ")");
    }
    t->added.emplace(a.id, a);
    t->added_ids.emplace(a.content, a.id);
    size = std::max<int64_t>(size, int64_t(a.id) + 1);
  }
  if (size > t->model->id_bound() + int64_t(added->size()) + 65536) {
    return Status::parse_error(where("added_tokens") + ": ids up to " + std::to_string(size - 1) +
                               " leave a gap far past model.vocab's " + std::to_string(t->model->id_bound()) + " ids");
  }
  t->size = size;
  for (const auto* ids : {&t->tmpl.prefix, &t->tmpl.suffix}) {
    for (int32_t id : *ids) {
      if (id >= size || (!t->added.count(id) && !t->model->token(id))) {
        return Status::parse_error(where("post_processor") + ": special token id " + std::to_string(id) +
                                   " is neither in model.vocab nor in added_tokens");
      }
    }
  }
  auto splitter = AddedTokenSplitter::build(*added, t->normalizer.get(), path);
  if (!splitter.is_ok()) return splitter.status();
  t->splitter = std::move(*splitter);
  return std::unique_ptr<Tokenizer>(std::move(t));
}

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path) {
  auto j = read_json_object(path);
  if (!j.is_ok()) return j.status();
  return make_tokenizer_json(*j, path);
}

}  // namespace tunableop::llm
