// Reading request bodies: every field's type and range, the API's unsupported options refused
// by name, hostile JSON (depth, NaN, huge numbers, bad UTF-8) refused without recursion.
#include "serve/openai/request_params.h"

#include <gtest/gtest.h>

#include <string>

#include "serve/openai/json_fields.h"

namespace tunableop::serve::openai {
namespace {

ApiOr<CompletionParams> completion(const std::string& body) {
  auto j = parse_json_object(body);
  if (!j.ok()) return j.error();
  return parse_completion_params(*j);
}

ApiOr<CompletionParams> chat(const std::string& body) {
  auto j = parse_json_object(body);
  if (!j.ok()) return j.error();
  return parse_chat_params(*j);
}

// The request fails with 400, `param` names the field and the message contains `words`.
void expect_bad(const ApiOr<CompletionParams>& r, const std::string& param, const std::string& words) {
  ASSERT_FALSE(r.ok()) << "accepted; expected an error about " << param;
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
}

TEST(RequestParams, TextPromptAndDefaults) {
  auto r = completion(R"({"model": "m", "prompt": "Hello"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompt_text, "Hello");
  EXPECT_FALSE(r->prompt_ids);
  EXPECT_EQ(r->model, "m");
  EXPECT_FALSE(r->max_tokens);
  EXPECT_EQ(r->sampling.temperature, 1.0);
  EXPECT_EQ(r->sampling.top_p, 1.0);
  EXPECT_EQ(r->sampling.top_k, 0);
  EXPECT_FALSE(r->sampling.seed);
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->ignore_eos);
  EXPECT_FALSE(r->return_token_ids);
}

TEST(RequestParams, EveryFieldRead) {
  auto r = completion(R"({"prompt": [1, 2, 3], "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 40,
      "seed": -1, "stop": ["a", "bc"], "stop_token_ids": [9], "stream": true,
      "stream_options": {"include_usage": true}, "ignore_eos": true, "return_token_ids": true,
      "include_stop_str_in_output": true, "n": 1, "best_of": 1, "logprobs": null, "echo": false,
      "presence_penalty": 0, "frequency_penalty": 0.0, "user": "x", "unknown_field": {"a": [1]}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(*r->max_tokens, 7);
  EXPECT_EQ(r->sampling.temperature, 0.0);
  EXPECT_EQ(r->sampling.top_p, 0.5);
  EXPECT_EQ(r->sampling.top_k, 40);
  EXPECT_EQ(*r->sampling.seed, UINT64_MAX);  // -1 modulo 2^64
  EXPECT_EQ(r->stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r->stop_token_ids, (std::vector<int64_t>{9}));
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->ignore_eos);
  EXPECT_TRUE(r->return_token_ids);
  EXPECT_TRUE(r->include_stop_str_in_output);
}

TEST(RequestParams, BatchFormsOfOnePrompt) {
  auto a = completion(R"({"prompt": ["text"]})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a->prompt_text, "text");
  auto b = completion(R"({"prompt": [[4, 5]]})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b->prompt_ids, (std::vector<int64_t>{4, 5}));
  expect_bad(completion(R"({"prompt": ["a", "b"]})"), "prompt", "one prompt per request");
  expect_bad(completion(R"({"prompt": [[1], [2]]})"), "prompt", "one prompt per request");
}

TEST(RequestParams, PromptErrorsNameTheField) {
  expect_bad(completion(R"({})"), "prompt", "required");
  expect_bad(completion(R"({"prompt": null})"), "prompt", "required");
  expect_bad(completion(R"({"prompt": 5})"), "prompt", "an integer");
  expect_bad(completion(R"({"prompt": []})"), "prompt", "empty");
  expect_bad(completion(R"({"prompt": [1, -2]})"), "prompt", "prompt[1]");
  expect_bad(completion(R"({"prompt": [1, 2.5]})"), "prompt", "2.5");
  expect_bad(completion(R"({"prompt": [1, true]})"), "prompt", "boolean");
  expect_bad(completion(R"({"prompt": [1, 4294967296]})"), "prompt", "prompt[1]");
  expect_bad(completion(R"({"prompt": [1, 99999999999999999999999]})"), "prompt", "prompt[1]");
}

TEST(RequestParams, WrongTypesAndRanges) {
  expect_bad(completion(R"({"prompt": "x", "max_tokens": "5"})"), "max_tokens", "a string");
  expect_bad(completion(R"({"prompt": "x", "max_tokens": 0})"), "max_tokens", "[1,");
  expect_bad(completion(R"({"prompt": "x", "max_tokens": -3})"), "max_tokens", "-3");
  expect_bad(completion(R"({"prompt": "x", "max_tokens": 5.0})"), "max_tokens", "integer");
  expect_bad(completion(R"({"prompt": "x", "max_tokens": 1e300})"), "max_tokens", "1e+300");
  expect_bad(completion(R"({"prompt": "x", "max_tokens": 18446744073709551615})"), "max_tokens",
             "18446744073709551615");
  expect_bad(completion(R"({"prompt": "x", "temperature": -0.1})"), "temperature", "[0, 2]");
  expect_bad(completion(R"({"prompt": "x", "temperature": "hot"})"), "temperature", "a string");
  expect_bad(completion(R"({"prompt": "x", "temperature": 1e308})"), "temperature", "temperature");
  expect_bad(completion(R"({"prompt": "x", "top_p": 0})"), "top_p", "(0, 1]");
  expect_bad(completion(R"({"prompt": "x", "top_p": 1.5})"), "top_p", "top_p");
  expect_bad(completion(R"({"prompt": "x", "top_k": -2})"), "top_k", "top_k");
  expect_bad(completion(R"({"prompt": "x", "seed": 1.5})"), "seed", "1.5");
  expect_bad(completion(R"({"prompt": "x", "seed": "7"})"), "seed", "a string");
  expect_bad(completion(R"({"prompt": "x", "stream": 1})"), "stream", "true or false");
  expect_bad(completion(R"({"prompt": "x", "ignore_eos": "yes"})"), "ignore_eos", "true or false");
  expect_bad(completion(R"({"prompt": "x", "return_token_ids": 0})"), "return_token_ids", "true or false");
  expect_bad(completion(R"({"prompt": "x", "model": 3})"), "model", "a string");
}

TEST(RequestParams, TopKMinusOneMeansEveryToken) {
  auto r = completion(R"({"prompt": "x", "top_k": -1})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sampling.top_k, 0);
}

TEST(RequestParams, StopForms) {
  auto one = completion(R"({"prompt": "x", "stop": "END"})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->stop, (std::vector<std::string>{"END"}));
  expect_bad(completion(R"({"prompt": "x", "stop": 3})"), "stop", "string or an array");
  expect_bad(completion(R"({"prompt": "x", "stop": ["a", 3]})"), "stop[1]", "a string");
  expect_bad(completion(R"({"prompt": "x", "stop": ""})"), "stop", "empty");
  expect_bad(completion(R"({"prompt": "x", "stop": [")" + std::string(300, 'a') + R"("]})"), "stop[0]", "300 bytes");
  std::string many = R"({"prompt": "x", "stop": [)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + "\"s\"";
  expect_bad(completion(many + "]}"), "stop", "17 strings");
  expect_bad(completion(R"({"prompt": "x", "stop_token_ids": [1, -1]})"), "stop_token_ids", "stop_token_ids[1]");
  expect_bad(completion(R"({"prompt": "x", "stop_token_ids": 5})"), "stop_token_ids", "an array");
}

TEST(RequestParams, StreamOptionsNeedAStream) {
  expect_bad(completion(R"({"prompt": "x", "stream_options": {"include_usage": true}})"), "stream_options",
             "only allowed");
  expect_bad(completion(R"({"prompt": "x", "stream": true, "stream_options": 1})"), "stream_options", "an object");
  expect_bad(completion(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})"),
             "stream_options.include_usage", "true or false");
}

TEST(RequestParams, UnsupportedOptionsAreRefusedByName) {
  expect_bad(completion(R"({"prompt": "x", "n": 2})"), "n", "n must be 1");
  expect_bad(completion(R"({"prompt": "x", "n": "1"})"), "n", "n must be 1");
  expect_bad(completion(R"({"prompt": "x", "best_of": 3})"), "best_of", "best_of");
  expect_bad(completion(R"({"prompt": "x", "logprobs": 5})"), "logprobs", "not supported");
  expect_bad(completion(R"({"prompt": "x", "echo": true})"), "echo", "not supported");
  expect_bad(completion(R"({"prompt": "x", "presence_penalty": 0.5})"), "presence_penalty", "not supported");
  expect_bad(completion(R"({"prompt": "x", "frequency_penalty": -1})"), "frequency_penalty", "not supported");
  expect_bad(completion(R"({"prompt": "x", "logit_bias": {"5": 10}})"), "logit_bias", "not supported");
  expect_bad(completion(R"({"prompt": "x", "suffix": "end"})"), "suffix", "not supported");
  expect_bad(completion(R"({"prompt": "x", "min_tokens": 4})"), "min_tokens", "ignore_eos");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]})"), "tools",
             "not supported");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})"),
             "response_format", "not supported");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template": "{{x}}"})"), "chat_template",
             "not supported");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true})"), "logprobs",
             "not supported");
  // Neutral values, as client libraries send them, pass.
  EXPECT_TRUE(chat(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [], "tool_choice": "none",
                       "response_format": {"type": "text"}, "logprobs": false, "n": 1})")
                  .ok());
}

TEST(RequestParams, ChatMessages) {
  auto r = chat(R"({"messages": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                                  {"role": "assistant", "content": null}],
                    "max_completion_tokens": 9, "max_tokens": 3})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[0].content, "Be brief.");
  EXPECT_EQ(r->messages[1].content, "a\nb");
  EXPECT_EQ(r->messages[2].content, "");
  EXPECT_EQ(*r->max_tokens, 9);  // max_completion_tokens wins
  expect_bad(chat(R"({})"), "messages", "required");
  expect_bad(chat(R"({"messages": {}})"), "messages", "an array");
  expect_bad(chat(R"({"messages": []})"), "messages", "empty");
  expect_bad(chat(R"({"messages": [5]})"), "messages[0]", "an object");
  expect_bad(chat(R"({"messages": [{"content": "x"}]})"), "messages[0].role", "role");
  expect_bad(chat(R"({"messages": [{"role": "user"}]})"), "messages[0].content", "required");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": 3}]})"), "messages[0].content", "an integer");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
             "messages[0].content[0].type", "only text");
  expect_bad(chat(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})"),
             "messages[0].content[0].text", "a string");
}

TEST(JsonBody, HostileBodies) {
  auto bad = [](const std::string& body, const std::string& words) {
    auto r = parse_json_object(body);
    ASSERT_FALSE(r.ok()) << body.substr(0, 40);
    EXPECT_EQ(r.error().http_status, 400);
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  };
  bad("", "not valid JSON");
  bad("{", "not valid JSON");
  bad("{\"prompt\": NaN}", "not valid JSON");
  bad("{\"prompt\": Infinity}", "not valid JSON");
  bad("{\"max_tokens\": -Infinity}", "not valid JSON");
  bad("{\"max_tokens\": 1e400}", "not valid JSON");
  bad("{\"a\": 1} trailing", "not valid JSON");
  bad("{\"a\": \"\xff\xfe\"}", "not valid JSON");
  bad("[1, 2]", "must be a JSON object");
  bad("\"text\"", "must be a JSON object");
  // Deep nesting: refused at the limit, whatever the depth sent, and without building it.
  bad(std::string(100000, '[') + std::string(100000, ']'), "deeper than");
  std::string deep_obj;
  for (int i = 0; i < 50000; ++i) deep_obj += "{\"a\":";
  bad(deep_obj + "1" + std::string(50000, '}'), "deeper than");
  bad(std::string(10000000, '['), "deeper than");  // never closed: still refused at the limit
  // At the limit it parses.
  std::string ok = "{\"a\":" + std::string(kMaxJsonDepth - 2, '[') + std::string(kMaxJsonDepth - 2, ']') + "}";
  EXPECT_TRUE(parse_json_object(ok).ok());
}

}  // namespace
}  // namespace tunableop::serve::openai
