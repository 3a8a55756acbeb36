// Response bodies and stream events in OpenAI's shapes; errors as {"error": {...}}.
#include "serve/openai/responses.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "serve_test_util.h"

namespace tunableop::serve::openai {
namespace {

using nlohmann::json;

ResponseMeta meta(Endpoint e, bool ids = false) { return ResponseMeta{new_response_id(e), 1700000001, "m", e, ids}; }

// The JSON of a `data: ...\n\n` event.
json event_json(const std::string& ev) {
  EXPECT_EQ(ev.substr(0, 6), "data: ");
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  return json::parse(ev.substr(6, ev.size() - 8));
}

TEST(Responses, CompletionBody) {
  auto j = json::parse(completion_body(meta(Endpoint::kCompletions, true), "hi", FinishReason::kLength, {1, 2}, {7}));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["created"], 1700000001);
  EXPECT_EQ(j["choices"][0]["text"], "hi");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["prompt_token_ids"], json({1, 2}));
  EXPECT_EQ(j["choices"][0]["token_ids"], json({7}));
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 2}, {"completion_tokens", 1}, {"total_tokens", 3}}));
  auto no_ids = json::parse(completion_body(meta(Endpoint::kCompletions), "hi", FinishReason::kStop, {1}, {7}));
  EXPECT_FALSE(no_ids["choices"][0].contains("token_ids"));
  EXPECT_EQ(no_ids["choices"][0]["finish_reason"], "stop");
}

TEST(Responses, ChatBody) {
  auto j = json::parse(completion_body(meta(Endpoint::kChat), "Hello!", FinishReason::kStop, {1}, {5, 6}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Hello!"}}));
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
}

TEST(Responses, StreamChunks) {
  const auto m = meta(Endpoint::kCompletions, true);
  auto first = event_json(chunk_event(m, "a", {4}, FinishReason::kNone, true, {1, 2}));
  EXPECT_EQ(first["object"], "text_completion");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(first["choices"][0]["prompt_token_ids"], json({1, 2}));
  EXPECT_EQ(first["choices"][0]["token_ids"], json({4}));
  auto last = event_json(chunk_event(m, "b", {5}, FinishReason::kLength, false, {1, 2}));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last["choices"][0].contains("prompt_token_ids"));
  EXPECT_EQ(last["id"], first["id"]);
  auto usage = event_json(usage_event(m, 2, 5));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  EXPECT_EQ(kDoneEvent, "data: [DONE]\n\n");
}

TEST(Responses, ChatStreamChunks) {
  const auto m = meta(Endpoint::kChat);
  auto first = event_json(chunk_event(m, "", {}, FinishReason::kNone, true, {}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  auto next = event_json(chunk_event(m, "x", {}, FinishReason::kNone, false, {}));
  EXPECT_EQ(next["choices"][0]["delta"], json({{"content", "x"}}));
  auto last = event_json(chunk_event(m, "", {}, FinishReason::kStop, false, {}));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
}

TEST(Responses, ErrorsAndStatusMapping) {
  ApiError e = invalid_field("max_tokens", "too many");
  auto j = json::parse(error_body(e));
  EXPECT_EQ(j, json({{"error",
                      {{"message", "too many"},
                       {"type", "invalid_request_error"},
                       {"param", "max_tokens"},
                       {"code", nullptr}}}}));
  EXPECT_EQ(error_from_status(Status::invalid_argument("x")).http_status, 400);
  EXPECT_EQ(error_from_status(Status::resource_exhausted("x")).http_status, 429);
  EXPECT_EQ(error_from_status(Status::unavailable("x")).http_status, 503);
  EXPECT_EQ(error_from_status(Status::device_error("x")).http_status, 500);
  EXPECT_EQ(error_from_status(Status::internal("x")).http_status, 500);
  // Bytes that are not UTF-8 in a message (a client's path, say) never break the JSON.
  auto bad = json::parse(error_body(invalid_field("", "no route /\xff\xfe")));
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("no route"), std::string::npos);
  auto ev = event_json(error_event(error_from_status(Status::device_error("fault"))));
  EXPECT_EQ(ev["error"]["type"], "internal_error");
}

TEST(Responses, IdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(new_response_id(Endpoint::kCompletions));
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(Responses, ModelsList) {
  auto m = testing::served_model(nullptr, 8192, 2048);
  auto j = json::parse(models_body(m));
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "test-model");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 2048);
  EXPECT_EQ(j["data"][0]["vocab_size"], 8192);
}

}  // namespace
}  // namespace tunableop::serve::openai
