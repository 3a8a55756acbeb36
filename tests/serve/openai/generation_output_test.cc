// One request's output from its Channel: text decoded without splitting characters, stop
// strings cut and the request cancelled, finish reasons and errors as the client sees them.
#include "serve/openai/generation_output.h"

#include <gtest/gtest.h>

#include "llm/text/text_stream.h"
#include "serve/openai/json_fields.h"
#include "serve_test_util.h"

namespace tunableop::serve::openai {
namespace {

using namespace std::chrono_literals;
using testing::served_model;

CompletionParams params(const std::string& body) {
  auto j = parse_json_object(body);
  auto p = parse_completion_params(*j);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return *p;
}

// Drains `out` (everything already pushed) into text, ids and the final delta.
struct Drained {
  std::string text;
  std::vector<int32_t> ids;
  GenerationOutput::Delta last;
};
Drained drain(GenerationOutput& out) {
  Drained d;
  for (int i = 0; i < 100 && !out.finished(); ++i) {
    auto delta = out.next(1ms);
    d.text += delta.text;
    d.ids.insert(d.ids.end(), delta.ids.begin(), delta.ids.end());
    d.last = delta;
  }
  return d;
}

TEST(GenerationOutput, IdsOnlyWithoutATokenizer) {
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
  for (int32_t id : {5, 6, 7}) ch->push(id);
  auto d = out.next(10ms);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(d.text, "");
  EXPECT_FALSE(d.finished);
  ch->finish(FinishReason::kLength);
  d = out.next(10ms);
  EXPECT_TRUE(d.finished);
  EXPECT_EQ(d.reason, FinishReason::kLength);
  EXPECT_EQ(out.completion_tokens(), 3);
  EXPECT_FALSE(ch->cancelled());
}

TEST(GenerationOutput, TimeoutWithoutNews) {
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
  auto d = out.next(1ms);
  EXPECT_TRUE(d.ids.empty());
  EXPECT_FALSE(d.finished);
}

TEST(GenerationOutput, TextEqualsTheOneShotDecode) {
  SERVE_TEST_TOKENIZER(tok);
  const std::vector<int32_t> prompt = {1, 100, 200};
  auto ids = tok->encode(" Hello wörld, caf\xc3\xa9 \xe2\x9c\x93 and more text");
  ASSERT_TRUE(ids.is_ok());
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(tok), params(R"({"prompt": [1]})"), prompt, ch);
  for (int32_t id : *ids) ch->push(id);
  ch->push(2);  // EOS: decodes to nothing
  ch->finish(FinishReason::kStop);
  Drained d = drain(out);
  auto want = llm::decode_continuation(*tok, prompt, *ids);
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(d.text, *want);
  EXPECT_EQ(d.last.reason, FinishReason::kStop);
  EXPECT_EQ(int64_t(d.ids.size()), int64_t(ids->size()) + 1);
}

// The ids arrive one at a time; a stop string spanning several tokens is cut, later ids dropped,
// and the runtime told to stop.
TEST(GenerationOutput, StopStringAcrossTokensCancels) {
  SERVE_TEST_TOKENIZER(tok);
  const std::string text = " The answer is 42. Then more words follow here";
  auto ids = tok->encode(text);
  ASSERT_TRUE(ids.is_ok());
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(tok), params(R"({"prompt": [1], "stop": ["42.", "never"]})"), {1}, ch);
  std::string got;
  GenerationOutput::Delta d;
  size_t pushed = 0;
  for (; pushed < ids->size() && !out.finished(); ++pushed) {
    ch->push((*ids)[pushed]);
    d = out.next(10ms);
    got += d.text;
  }
  ASSERT_TRUE(out.finished());
  EXPECT_EQ(d.reason, FinishReason::kStop);
  EXPECT_TRUE(d.error.is_ok());
  EXPECT_EQ(got, " The answer is ");  // the continuation keeps its leading space
  EXPECT_TRUE(ch->cancelled());
  EXPECT_LT(pushed, ids->size());
  // completion_tokens counts up to the id that completed the stop string.
  EXPECT_EQ(out.completion_tokens(), int64_t(pushed));
}

TEST(GenerationOutput, StopStringIncludedOnRequest) {
  SERVE_TEST_TOKENIZER(tok);
  auto ids = tok->encode(" abc STOP def");
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(tok),
                       params(R"({"prompt": [1], "stop": "STOP", "include_stop_str_in_output": true})"), {1}, ch);
  for (int32_t id : *ids) ch->push(id);
  Drained d = drain(out);
  EXPECT_EQ(d.text, " abc STOP");
  EXPECT_EQ(d.last.reason, FinishReason::kStop);
}

TEST(GenerationOutput, HeldBackTextIsReleasedAtTheEnd) {
  SERVE_TEST_TOKENIZER(tok);
  auto ids = tok->encode(" abc ST");
  auto ch = std::make_shared<Channel>();
  GenerationOutput out(served_model(tok), params(R"({"prompt": [1], "stop": "STOP"})"), {1}, ch);
  for (int32_t id : *ids) ch->push(id);
  ch->finish(FinishReason::kLength);
  Drained d = drain(out);
  EXPECT_EQ(d.text, " abc ST");
  EXPECT_EQ(d.last.reason, FinishReason::kLength);
}

TEST(GenerationOutput, ErrorsAndServerCancellation) {
  {
    auto ch = std::make_shared<Channel>();
    GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
    ch->push(3);
    ch->finish(FinishReason::kError, Status::device_error("CUDA fault in step 12"));
    Drained d = drain(out);
    EXPECT_EQ(d.last.reason, FinishReason::kError);
    EXPECT_EQ(d.last.error.code(), StatusCode::kDeviceError);
  }
  {
    auto ch = std::make_shared<Channel>();
    GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
    ch->finish(FinishReason::kError);  // no reason given: still an error
    Drained d = drain(out);
    EXPECT_FALSE(d.last.error.is_ok());
  }
  {
    // Cancelled by the server (drain past its grace), not by this client: unavailable.
    auto ch = std::make_shared<Channel>();
    GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
    ch->finish(FinishReason::kCancelled);
    Drained d = drain(out);
    EXPECT_EQ(d.last.error.code(), StatusCode::kUnavailable);
  }
}

TEST(GenerationOutput, AbandonedRequestIsCancelled) {
  auto ch = std::make_shared<Channel>();
  {
    GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, ch);
    ch->push(3);
    (void)out.next(1ms);
  }
  EXPECT_TRUE(ch->cancelled());
  auto finished = std::make_shared<Channel>();
  {
    GenerationOutput out(served_model(), params(R"({"prompt": [1]})"), {1}, finished);
    finished->finish(FinishReason::kLength);
    drain(out);
  }
  EXPECT_FALSE(finished->cancelled());
}

}  // namespace
}  // namespace tunableop::serve::openai
