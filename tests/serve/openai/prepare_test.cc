// From request fields to the runtime's request: the model's name, tokenization (BOS as the
// model wants), ids against the vocabulary, lengths against the context, chat templates.
#include "serve/openai/prepare.h"

#include <gtest/gtest.h>

#include "serve/openai/json_fields.h"
#include "serve_test_util.h"

namespace tunableop::serve::openai {
namespace {

using testing::served_model;

CompletionParams params(const std::string& body, bool is_chat = false) {
  auto j = parse_json_object(body);
  EXPECT_TRUE(j.ok());
  auto p = is_chat ? parse_chat_params(*j) : parse_completion_params(*j);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return *p;
}

void expect_bad(const ApiOr<GenerationRequest>& r, int status, const std::string& param, const std::string& words) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, status);
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
}

TEST(Prepare, IdsPromptAsItIs) {
  const auto m = served_model(nullptr, 100, 64);
  const auto arrival = Clock::now();
  auto g = prepare_generation(params(R"({"prompt": [5, 6, 99], "max_tokens": 4, "temperature": 0, "seed": 3,
                                         "ignore_eos": true, "stop_token_ids": [7]})"),
                              m, arrival);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->prompt, (std::vector<int32_t>{5, 6, 99}));  // no BOS added to ids
  EXPECT_EQ(g->max_tokens, 4);
  EXPECT_EQ(g->sampling.temperature, 0.0);
  EXPECT_EQ(*g->sampling.seed, 3u);
  EXPECT_TRUE(g->ignore_eos);
  EXPECT_EQ(g->stop_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(g->arrival, arrival);
}

TEST(Prepare, DefaultMaxTokensFitsTheContext) {
  const auto m = served_model(nullptr, 100, 20);
  auto g = prepare_generation(params(R"({"prompt": [1, 2, 3]})"), m, Clock::now());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->max_tokens, kDefaultCompletionTokens);
  auto near_end = prepare_generation(params(R"({"prompt": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]})"), m, Clock::now());
  ASSERT_TRUE(near_end.ok());
  EXPECT_EQ(near_end->max_tokens, 5);  // the room left
}

TEST(Prepare, ErrorsNameTheField) {
  const auto m = served_model(nullptr, 100, 10);
  expect_bad(prepare_generation(params(R"({"model": "other", "prompt": [1]})"), m, Clock::now()), 404, "model",
             "`other` does not exist");
  expect_bad(prepare_generation(params(R"({"prompt": [1, 100]})"), m, Clock::now()), 400, "prompt",
             "prompt[1] = 100 is not a token id: the vocabulary has 100 tokens");
  expect_bad(prepare_generation(params(R"({"prompt": [1,2,3,4,5,6,7,8,9,10]})"), m, Clock::now()), 400, "prompt",
             "10 tokens");
  expect_bad(prepare_generation(params(R"({"prompt": [1, 2, 3], "max_tokens": 8})"), m, Clock::now()), 400,
             "max_tokens", "(3 tokens) + max_tokens (8) = 11 exceeds the model's context of 10");
  expect_bad(prepare_generation(params(R"({"prompt": [1], "stop_token_ids": [100]})"), m, Clock::now()), 400,
             "stop_token_ids", "stop_token_ids[0] = 100");
  // A model without a tokenizer: ids only, no stop strings, no chat.
  expect_bad(prepare_generation(params(R"({"prompt": "Hello"})"), m, Clock::now()), 400, "prompt", "no tokenizer");
  expect_bad(prepare_generation(params(R"({"prompt": [1], "stop": "x"})"), m, Clock::now()), 400, "stop",
             "no tokenizer");
  expect_bad(prepare_generation(params(R"({"messages": [{"role": "user", "content": "hi"}]})", true), m, Clock::now()),
             400, "messages", "no chat template");
  // The served name itself passes.
  EXPECT_TRUE(prepare_generation(params(R"({"model": "test-model", "prompt": [1]})"), m, Clock::now()).ok());
}

TEST(Prepare, TextPromptThroughTheTokenizerWithBos) {
  SERVE_TEST_TOKENIZER(tok);
  const auto m = served_model(tok, 512, 256);
  auto g = prepare_generation(params(R"({"prompt": "Hello world", "max_tokens": 3})"), m, Clock::now());
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto ids = tok->encode("Hello world");
  ASSERT_TRUE(ids.is_ok());
  std::vector<int32_t> want = {1};
  want.insert(want.end(), ids->begin(), ids->end());
  EXPECT_EQ(g->prompt, want);
  // No BOS when the model says so.
  auto no_bos = m;
  no_bos.special.add_bos = false;
  auto g2 = prepare_generation(params(R"({"prompt": "Hello world"})"), no_bos, Clock::now());
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(g2->prompt, *ids);
  // A text too long for the context names the prompt.
  auto small = served_model(tok, 512, 4);
  expect_bad(prepare_generation(params(R"({"prompt": "Hello world, this is long"})"), small, Clock::now()), 400,
             "prompt", "context is 4 tokens");
}

TEST(Prepare, ChatThroughTheTemplate) {
  SERVE_TEST_TOKENIZER(tok);
  auto m = served_model(tok, 512, 256);
  std::vector<ChatMessage> seen;
  m.chat_template = [&seen](const std::vector<ChatMessage>& msgs) -> StatusOr<std::string> {
    seen = msgs;
    std::string s;
    for (const auto& x : msgs) s += "<" + x.role + ">" + x.content;
    return s + "<assistant>";
  };
  auto g = prepare_generation(params(R"({"messages": [{"role": "user", "content": "Hi"}]})", true), m, Clock::now());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].content, "Hi");
  auto want = tok->encode("<user>Hi<assistant>");  // no BOS added: the template writes it
  EXPECT_EQ(g->prompt, *want);
  EXPECT_EQ(g->max_tokens, 256 - int64_t(want->size()));  // chat default: the rest of the context
  // The template's own error reaches the client.
  m.chat_template = [](const std::vector<ChatMessage>&) -> StatusOr<std::string> {
    return Status::invalid_argument("roles must alternate user/assistant");
  };
  expect_bad(prepare_generation(params(R"({"messages": [{"role": "user", "content": "Hi"}]})", true), m, Clock::now()),
             400, "messages", "roles must alternate");
}

}  // namespace
}  // namespace tunableop::serve::openai
