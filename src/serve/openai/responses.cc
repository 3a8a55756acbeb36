#include "serve/openai/responses.h"

#include <fmt/format.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <random>

namespace tunableop::serve::openai {

namespace {

using nlohmann::json;

// Text is valid UTF-8 (TextStream holds back partial characters); replacing instead of throwing
// keeps a bug there from becoming a failed response.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const char* object_name(const ResponseMeta& m, bool chunk) {
  if (m.endpoint == Endpoint::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

json head(const ResponseMeta& m, bool chunk) {
  return json{{"id", m.id}, {"object", object_name(m, chunk)}, {"created", m.created}, {"model", m.model}};
}

json usage(int64_t prompt, int64_t completion) {
  return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json reason_json(FinishReason r) { return r == FinishReason::kNone ? json(nullptr) : json(api_finish_reason(r)); }

}  // namespace

std::string new_response_id(Endpoint endpoint) {
  static const uint64_t kBoot = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  return fmt::format("{}{:016x}{:016x}", endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", splitmix64(kBoot),
                     splitmix64(kBoot ^ splitmix64(n)));
}

const char* api_finish_reason(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }

std::string completion_body(const ResponseMeta& meta, const std::string& text, FinishReason reason,
                            const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", api_finish_reason(reason)}};
  if (meta.endpoint == Endpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  if (meta.return_token_ids) {
    choice["prompt_token_ids"] = prompt;
    choice["token_ids"] = ids;
  }
  json j = head(meta, false);
  j["choices"] = json::array({choice});
  j["usage"] = usage(int64_t(prompt.size()), int64_t(ids.size()));
  return dump(j);
}

std::string chunk_event(const ResponseMeta& meta, const std::string& text, const std::vector<int32_t>& ids,
                        FinishReason reason, bool first, const std::vector<int32_t>& prompt) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason_json(reason)}};
  if (meta.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  if (meta.return_token_ids) {
    if (first) choice["prompt_token_ids"] = prompt;
    choice["token_ids"] = ids;
  }
  json j = head(meta, true);
  j["choices"] = json::array({choice});
  return "data: " + dump(j) + "\n\n";
}

std::string usage_event(const ResponseMeta& meta, int64_t prompt_tokens, int64_t completion_tokens) {
  json j = head(meta, true);
  j["choices"] = json::array();
  j["usage"] = usage(prompt_tokens, completion_tokens);
  return "data: " + dump(j) + "\n\n";
}

std::string error_event(const ApiError& e) { return "data: " + error_body(e) + "\n\n"; }

std::string models_body(const ServedModel& m) {
  json model = {{"id", m.name},   {"object", "model"}, {"created", m.created},           {"owned_by", "tunableop"},
                {"root", m.name}, {"parent", nullptr}, {"max_model_len", m.max_context}, {"vocab_size", m.vocab_size}};
  return dump(json{{"object", "list"}, {"data", json::array({model})}});
}

}  // namespace tunableop::serve::openai
