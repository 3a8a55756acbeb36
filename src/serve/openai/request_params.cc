#include "serve/openai/request_params.h"

#include <fmt/format.h>

#include <climits>

namespace tunableop::serve::openai {

namespace {

constexpr size_t kMaxMessages = 4096;

// Reads `field` into `out` when present; returns the error otherwise. Used as
//   if (auto e = take(read_int(...), out)) return *e;
template <class T, class U>
std::optional<ApiError> take(ApiOr<std::optional<T>> r, U& out) {
  if (!r.ok()) return r.error();
  if (r->has_value()) out = **r;
  return std::nullopt;
}

// Fields of the API whose non-default values ask for something this server does not do.
std::optional<ApiError> refuse_unsupported(const Json& body, Endpoint endpoint) {
  auto refuse = [](const char* field, const std::string& why) {
    return invalid_field(field, fmt::format("{} is not supported{}", field, why));
  };
  if (const Json* n = find_field(body, "n")) {
    if (!n->is_number_integer() || n->get<int64_t>() != 1)
      return invalid_field("n", fmt::format("n must be 1: one choice per request (got {})", n->dump()));
  }
  if (const Json* b = find_field(body, "best_of")) {
    if (!b->is_number_integer() || b->get<int64_t>() != 1)
      return invalid_field("best_of", fmt::format("best_of must be 1 (got {})", b->dump()));
  }
  // Zero or neutral values are what a client library sends by default: accepted.
  for (const char* f : {"presence_penalty", "frequency_penalty", "min_p"}) {
    if (const Json* v = find_field(body, f); v && !(v->is_number() && v->get<double>() == 0.0))
      return refuse(f, " (only 0)");
  }
  if (const Json* v = find_field(body, "repetition_penalty"); v && !(v->is_number() && v->get<double>() == 1.0))
    return refuse("repetition_penalty", " (only 1)");
  if (const Json* v = find_field(body, "min_tokens"); v && !(v->is_number_integer() && v->get<int64_t>() == 0))
    return refuse("min_tokens", " (use ignore_eos for a fixed length)");
  if (const Json* v = find_field(body, "logit_bias"); v && !(v->is_object() && v->empty()))
    return refuse("logit_bias", "");
  if (const Json* v = find_field(body, "logprobs"); v && !(v->is_boolean() && !v->get<bool>()))
    return refuse("logprobs", "");
  if (find_field(body, "top_logprobs")) return refuse("top_logprobs", "");
  if (const Json* v = find_field(body, "echo"); v && !(v->is_boolean() && !v->get<bool>())) return refuse("echo", "");
  if (const Json* v = find_field(body, "suffix"); v && !(v->is_string() && v->get<std::string>().empty()))
    return refuse("suffix", "");
  if (const Json* v = find_field(body, "use_beam_search"); v && !(v->is_boolean() && !v->get<bool>()))
    return refuse("use_beam_search", "");
  if (endpoint == Endpoint::kChat) {
    for (const char* f : {"tools", "functions"}) {
      if (const Json* v = find_field(body, f); v && !(v->is_array() && v->empty())) return refuse(f, "");
    }
    for (const char* f : {"tool_choice", "function_call"}) {
      if (const Json* v = find_field(body, f); v && !(v->is_string() && v->get<std::string>() == "none"))
        return refuse(f, "");
    }
    if (const Json* v = find_field(body, "response_format");
        v && !(v->is_object() && v->value("type", Json()) == Json("text")))
      return refuse("response_format", " (only {\"type\": \"text\"})");
    if (find_field(body, "chat_template")) return refuse("chat_template", ": the model's own template is used");
  }
  return std::nullopt;
}

std::optional<ApiError> read_stop(const Json& body, CompletionParams& p) {
  const Json* v = find_field(body, "stop");
  if (!v) return std::nullopt;
  auto add = [&](const Json& s, const std::string& param) -> std::optional<ApiError> {
    if (!s.is_string())
      return invalid_field(param, fmt::format("{} must be a string (got {})", param, json_type_phrase(s)));
    std::string text = s.get<std::string>();
    if (text.empty()) return invalid_field(param, param + " must not be empty");
    if (text.size() > kMaxStopStringBytes)
      return invalid_field(param,
                           fmt::format("{} is {} bytes long; at most {}", param, text.size(), kMaxStopStringBytes));
    p.stop.push_back(std::move(text));
    return std::nullopt;
  };
  if (v->is_string()) return add(*v, "stop");
  if (!v->is_array())
    return invalid_field("stop", "stop must be a string or an array of strings (got " + json_type_phrase(*v) + ")");
  if (v->size() > size_t(kMaxStopStrings))
    return invalid_field("stop", fmt::format("stop has {} strings; at most {}", v->size(), kMaxStopStrings));
  for (size_t i = 0; i < v->size(); ++i) {
    if (auto e = add((*v)[i], fmt::format("stop[{}]", i))) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> read_stop_token_ids(const Json& body, CompletionParams& p) {
  const Json* v = find_field(body, "stop_token_ids");
  if (!v) return std::nullopt;
  if (!v->is_array())
    return invalid_field("stop_token_ids",
                         "stop_token_ids must be an array of token ids (got " + json_type_phrase(*v) + ")");
  if (v->size() > size_t(kMaxStopTokenIds))
    return invalid_field("stop_token_ids",
                         fmt::format("stop_token_ids has {} ids; at most {}", v->size(), kMaxStopTokenIds));
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& id = (*v)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX))
      return invalid_field("stop_token_ids",
                           fmt::format("stop_token_ids[{}] must be a token id (got {})", i, id.dump()));
    p.stop_token_ids.push_back(id.get<int64_t>());
  }
  return std::nullopt;
}

// What both endpoints share: sampling, lengths, stop conditions, streaming, vLLM's extensions.
std::optional<ApiError> read_common(const Json& body, CompletionParams& p) {
  if (auto e = refuse_unsupported(body, p.endpoint)) return e;
  if (auto e = take(read_string(body, "model"), p.model)) return e;
  std::optional<int64_t> max_tokens;
  if (auto e = take(read_int(body, "max_tokens", 1, kMaxTokensLimit), max_tokens)) return e;
  if (p.endpoint == Endpoint::kChat) {
    // The newer name wins when both are given.
    if (auto e = take(read_int(body, "max_completion_tokens", 1, kMaxTokensLimit), max_tokens)) return e;
  }
  p.max_tokens = max_tokens;
  if (auto e = take(read_number(body, "temperature", 0.0, 2.0), p.sampling.temperature)) return e;
  if (auto e = take(read_number(body, "top_p", 0.0, 1.0), p.sampling.top_p)) return e;
  if (p.sampling.top_p <= 0.0) return invalid_field("top_p", "top_p must be in (0, 1] (got 0)");
  int64_t top_k = 0;
  if (auto e = take(read_int(body, "top_k", -1, INT32_MAX), top_k)) return e;
  p.sampling.top_k = top_k < 0 ? 0 : top_k;  // -1 (vLLM) and 0: every token
  std::optional<uint64_t> seed;
  if (auto e = take(read_seed(body, "seed"), seed)) return e;
  p.sampling.seed = seed;
  if (auto e = read_stop(body, p)) return e;
  if (auto e = read_stop_token_ids(body, p)) return e;
  if (auto e = take(read_bool(body, "stream"), p.stream)) return e;
  if (const Json* so = find_field(body, "stream_options")) {
    if (!so->is_object())
      return invalid_field("stream_options", "stream_options must be an object (got " + json_type_phrase(*so) + ")");
    if (!p.stream) return invalid_field("stream_options", "stream_options is only allowed with \"stream\": true");
    if (auto e = take(read_bool(*so, "include_usage"), p.include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  if (auto e = take(read_bool(body, "ignore_eos"), p.ignore_eos)) return e;
  if (auto e = take(read_bool(body, "return_token_ids"), p.return_token_ids)) return e;
  if (auto e = take(read_bool(body, "include_stop_str_in_output"), p.include_stop_str_in_output)) return e;
  return std::nullopt;
}

// A prompt: a string, a list of token ids, or a list holding one of those (the batch forms of
// the API, with a batch of one).
std::optional<ApiError> read_prompt(const Json& body, CompletionParams& p) {
  const Json* v = find_field(body, "prompt");
  if (!v) return invalid_field("prompt", "prompt is required (a string or an array of token ids)");
  const Json* one = v;
  if (v->is_array() && v->size() == 1 && ((*v)[0].is_string() || (*v)[0].is_array())) one = &(*v)[0];
  if (one->is_string()) {
    p.prompt_text = one->get<std::string>();
    return std::nullopt;
  }
  if (!one->is_array())
    return invalid_field("prompt",
                         "prompt must be a string or an array of token ids (got " + json_type_phrase(*one) + ")");
  if (one->empty()) return invalid_field("prompt", "prompt must not be empty");
  std::vector<int64_t> ids;
  ids.reserve(one->size());
  for (size_t i = 0; i < one->size(); ++i) {
    const Json& id = (*one)[i];
    if (id.is_string() || id.is_array())
      return invalid_field("prompt", fmt::format("one prompt per request (got a batch of {})", v->size()));
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX))
      return invalid_field("prompt", fmt::format("prompt[{}] must be a token id, an integer >= 0 (got {})", i,
                                                 id.is_number() ? id.dump() : json_type_phrase(id)));
    ids.push_back(id.get<int64_t>());
  }
  p.prompt_ids = std::move(ids);
  return std::nullopt;
}

std::optional<ApiError> read_content(const Json& content, const std::string& param, std::string& out) {
  if (content.is_null()) return std::nullopt;  // an assistant turn that carried tool calls only
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return invalid_field(param,
                         param + " must be a string or an array of text parts (got " + json_type_phrase(content) + ")");
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pp = fmt::format("{}[{}]", param, i);
    if (!part.is_object()) return invalid_field(pp, pp + " must be an object {\"type\": \"text\", \"text\": ...}");
    const Json* type = find_field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      return invalid_field(pp + ".type", pp + ".type must be \"text\": only text content is supported");
    const Json* text = find_field(part, "text");
    if (!text || !text->is_string()) return invalid_field(pp + ".text", pp + ".text must be a string");
    if (i) out += "\n";
    out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const Json& body, CompletionParams& p) {
  const Json* v = find_field(body, "messages");
  if (!v) return invalid_field("messages", "messages is required (an array of {\"role\", \"content\"})");
  if (!v->is_array()) return invalid_field("messages", "messages must be an array (got " + json_type_phrase(*v) + ")");
  if (v->empty()) return invalid_field("messages", "messages must not be empty");
  if (v->size() > kMaxMessages)
    return invalid_field("messages", fmt::format("messages has {} entries; at most {}", v->size(), kMaxMessages));
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& m = (*v)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return invalid_field(param, param + " must be an object (got " + json_type_phrase(m) + ")");
    const Json* role = find_field(m, "role");
    if (!role || !role->is_string() || role->get<std::string>().empty())
      return invalid_field(param + ".role", param + ".role must be a non-empty string");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    auto c = m.find("content");
    if (c == m.end()) return invalid_field(param + ".content", param + ".content is required");
    if (auto e = read_content(*c, param + ".content", msg.content)) return e;
    p.messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

}  // namespace

ApiOr<CompletionParams> parse_completion_params(const Json& body) {
  CompletionParams p;
  p.endpoint = Endpoint::kCompletions;
  if (auto e = read_prompt(body, p)) return *e;
  if (auto e = read_common(body, p)) return *e;
  return p;
}

ApiOr<CompletionParams> parse_chat_params(const Json& body) {
  CompletionParams p;
  p.endpoint = Endpoint::kChat;
  if (auto e = read_messages(body, p)) return *e;
  if (auto e = read_common(body, p)) return *e;
  return p;
}

}  // namespace tunableop::serve::openai
