// The HTTP front end in-process over a fake Backend, through a real socket: routes, JSON and
// server-sent-event framing, errors of every kind with their status codes, --api-key, body
// limits, clients that stall or vanish (their requests cancelled), many streams at once.
#include "serve/http/server.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "fake_backend.h"
#include "http/http_test_util.h"
#include "llm/text/text_stream.h"
#include "serve_test_util.h"

namespace tunableop::serve::http {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::eventually;
using testing::FakeBackend;
using testing::post_stream;
using testing::RawConnection;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpOptions o = {}, bool attach = true) {
    o.port = 0;
    server_ = std::make_unique<HttpServer>(o);
    ASSERT_TRUE(server_->start().is_ok());
    ASSERT_GT(server_->port(), 0);
    if (attach) server_->attach(backend_, model_);
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(20s);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
    auto c = client();
    return c.Post(path.c_str(), h, body, "application/json");
  }
  // The error object of a JSON error answer, checked for its shape.
  static json error_of(const httplib::Result& r) {
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    auto j = json::parse(r->body);
    EXPECT_TRUE(j["error"].contains("message"));
    EXPECT_TRUE(j["error"].contains("type"));
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
    return j["error"];
  }

  FakeBackend backend_;
  openai::ServedModel model_ = testing::served_model(nullptr, 1000, 512);
  std::unique_ptr<HttpServer> server_;  // declared last: stopped before the backend goes
};

TEST_F(HttpServerTest, HealthFollowsTheBackend) {
  start({}, /*attach=*/false);
  auto c = client();
  EXPECT_EQ(c.Get("/health")->status, 503);  // loading
  auto loading = post("/v1/completions", R"({"prompt": [1]})");
  EXPECT_EQ(loading->status, 503);
  EXPECT_NE(error_of(loading)["message"].get<std::string>().find("loading"), std::string::npos);
  backend_.ready = false;
  server_->attach(backend_, model_);
  EXPECT_EQ(c.Get("/health")->status, 503);  // warming up
  backend_.ready = true;
  auto ok = c.Get("/health");
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["status"], "ok");
  backend_.drain(0ms);
  auto draining = c.Get("/health");
  EXPECT_EQ(draining->status, 503);
  EXPECT_EQ(json::parse(draining->body)["status"], "draining");
}

TEST_F(HttpServerTest, ModelsList) {
  start();
  auto r = client().Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  auto j = json::parse(r->body);
  EXPECT_EQ(j["data"][0]["id"], "test-model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 512);
  EXPECT_EQ(j["data"][0]["vocab_size"], 1000);
}

TEST_F(HttpServerTest, WholeCompletion) {
  start();
  auto r =
      post("/v1/completions", R"({"model": "test-model", "prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0})");
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  const auto want = FakeBackend::default_ids({5, 6, 7}, 6, 1000);
  // Without a tokenizer the ids are the answer, return_token_ids or not.
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(j["choices"][0]["prompt_token_ids"], json({5, 6, 7}));
  EXPECT_EQ(j["choices"][0]["text"], "");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"], json({{"prompt_tokens", 3}, {"completion_tokens", 6}, {"total_tokens", 9}}));
  // The runtime got what was asked.
  auto reqs = backend_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(reqs[0].max_tokens, 6);
  EXPECT_EQ(reqs[0].sampling.temperature, 0.0);
}

TEST_F(HttpServerTest, StreamFraming) {
  start();
  backend_.token_delay = 2ms;
  auto s =
      post_stream(server_->port(), "/v1/completions",
                  R"({"prompt": [9], "max_tokens": 8, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(s.sent);
  ASSERT_EQ(s.status, 200) << s.raw;
  auto type = s.headers.find("Content-Type");
  ASSERT_NE(type, s.headers.end());
  EXPECT_EQ(type->second, "text/event-stream");
  // Every event is `data: ...\n\n`, the last is [DONE], nothing after it.
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events.back(), "[DONE]");
  EXPECT_EQ(s.raw.substr(s.raw.size() - 14), "data: [DONE]\n\n");
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
    const auto& c = s.chunks[i];
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["id"], s.chunks[0]["id"]);
    auto t = c["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), t.begin(), t.end());
    const bool last_choice = i + 2 == s.chunks.size();
    EXPECT_EQ(c["choices"][0]["finish_reason"].is_null(), !last_choice);
  }
  EXPECT_EQ(s.chunks[0]["choices"][0]["prompt_token_ids"], json({9}));
  EXPECT_EQ(ids, FakeBackend::default_ids({9}, 8, 1000));
  EXPECT_EQ(s.chunks[s.chunks.size() - 2]["choices"][0]["finish_reason"], "length");
  // include_usage: a last chunk with no choices.
  EXPECT_TRUE(s.chunks.back()["choices"].empty());
  EXPECT_EQ(s.chunks.back()["usage"]["completion_tokens"], 8);
}

TEST_F(HttpServerTest, BadRequestsAreJsonErrors) {
  start();
  auto bad_json = post("/v1/completions", "{\"prompt\": [1,");
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(error_of(bad_json)["message"].get<std::string>().find("not valid JSON"), std::string::npos);
  auto deep = post("/v1/completions", std::string(200000, '['));
  EXPECT_EQ(deep->status, 400);
  EXPECT_NE(error_of(deep)["message"].get<std::string>().find("deeper"), std::string::npos);
  auto nan = post("/v1/completions", R"({"prompt": [1], "temperature": NaN})");
  EXPECT_EQ(nan->status, 400);
  auto field = post("/v1/completions", R"({"prompt": [1], "max_tokens": "many"})");
  EXPECT_EQ(field->status, 400);
  EXPECT_EQ(error_of(field)["param"], "max_tokens");
  auto n2 = post("/v1/completions", R"({"prompt": [1], "n": 2})");
  EXPECT_EQ(n2->status, 400);
  EXPECT_EQ(error_of(n2)["param"], "n");
  auto range = post("/v1/completions", R"({"prompt": [1, 1000]})");
  EXPECT_EQ(range->status, 400);
  EXPECT_NE(error_of(range)["message"].get<std::string>().find("prompt[1] = 1000"), std::string::npos);
  auto context = post("/v1/completions", R"({"prompt": [1, 2], "max_tokens": 511})");
  EXPECT_EQ(context->status, 400);
  EXPECT_EQ(error_of(context)["param"], "max_tokens");
  auto text = post("/v1/completions", R"({"prompt": "no tokenizer here"})");
  EXPECT_EQ(text->status, 400);
  EXPECT_NE(error_of(text)["message"].get<std::string>().find("no tokenizer"), std::string::npos);
  auto model = post("/v1/completions", R"({"model": "gpt-4", "prompt": [1]})");
  EXPECT_EQ(model->status, 404);
  EXPECT_EQ(error_of(model)["code"], "model_not_found");
  auto chat = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(chat->status, 400);
  EXPECT_NE(error_of(chat)["message"].get<std::string>().find("no chat template"), std::string::npos);
  EXPECT_TRUE(backend_.requests().empty());  // none reached the runtime
}

TEST_F(HttpServerTest, RoutesAndMethods) {
  start();
  auto c = client();
  auto missing = c.Get("/v1/nothing");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(error_of(missing)["type"], "not_found_error");
  auto get_completions = c.Get("/v1/completions");
  EXPECT_EQ(get_completions->status, 405);
  EXPECT_EQ(get_completions->get_header_value("Allow"), "POST");
  error_of(get_completions);
  auto post_health = post("/health", "{}");
  EXPECT_EQ(post_health->status, 405);
  EXPECT_EQ(post_health->get_header_value("Allow"), "GET");
  EXPECT_EQ(c.Delete("/v1/models")->status, 405);
  EXPECT_EQ(c.Put("/metrics", "x", "text/plain")->status, 405);
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413) {
  HttpOptions o;
  o.max_body_bytes = 1000;
  start(o);
  auto big = post("/v1/completions", R"({"prompt": [1], "user": ")" + std::string(2000, 'x') + "\"}");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(error_of(big)["message"].get<std::string>().find("1000 bytes"), std::string::npos);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1], "max_tokens": 1})")->status, 200);
}

TEST_F(HttpServerTest, BackendErrorsMapToStatusCodes) {
  start();
  backend_.submit_error = Status::resource_exhausted("the waiting queue is full (1024 requests)");
  auto full = post("/v1/completions", R"({"prompt": [1]})");
  EXPECT_EQ(full->status, 429);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_NE(error_of(full)["message"].get<std::string>().find("queue is full"), std::string::npos);
  backend_.submit_error = Status::unavailable("draining");
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1]})")->status, 503);
  backend_.submit_error = Status::invalid_argument("the sequence cannot fit in the KV cache");
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1]})")->status, 400);
  backend_.submit_error = Status::internal("broken");
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1]})")->status, 500);
  backend_.submit_error = Status::ok();
  // A fault before the first token keeps its status, streamed or not.
  backend_.fail_after_tokens = 0;
  auto r = post("/v1/completions", R"({"prompt": [1], "max_tokens": 4})");
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("fault injected"), std::string::npos);
  auto s0 = post_stream(server_->port(), "/v1/completions", R"({"prompt": [1], "max_tokens": 4, "stream": true})");
  EXPECT_EQ(s0.status, 500);
  // A fault after tokens went out: whole answers are 500, streams end with an error event.
  backend_.fail_after_tokens = 2;
  backend_.token_delay = 30ms;  // the first token goes out alone
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1], "max_tokens": 4})")->status, 500);
  auto s = post_stream(server_->port(), "/v1/completions", R"({"prompt": [1], "max_tokens": 4, "stream": true})");
  EXPECT_EQ(s.status, 200);
  ASSERT_GE(s.chunks.size(), 2u);
  EXPECT_TRUE(s.chunks.back().contains("error"));
  EXPECT_EQ(s.events.back(), "[DONE]");
}

TEST_F(HttpServerTest, ExceptionInTheBackendIs500NotACrash) {
  start();
  backend_.script = [](const GenerationRequest&) -> std::vector<int32_t> { throw std::runtime_error("boom"); };
  auto r = post("/v1/completions", R"({"prompt": [1]})");
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("boom"), std::string::npos);
  backend_.script = nullptr;
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1], "max_tokens": 2})")->status, 200);
}

TEST_F(HttpServerTest, ApiKey) {
  HttpOptions o;
  o.api_key = "s3cret";
  start(o);
  auto c = client();
  auto none = c.Get("/v1/models");
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(error_of(none)["code"], "invalid_api_key");
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer s3cret2"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer s3cre"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "s3cret"}})->status, 401);
  EXPECT_EQ(c.Get("/health")->status, 401);
  EXPECT_EQ(c.Get("/metrics")->status, 401);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1]})")->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer s3cret"}})->status, 200);
  EXPECT_EQ(c.Get("/health", {{"Authorization", "bearer s3cret"}})->status, 200);
  EXPECT_EQ(
      post("/v1/completions", R"({"prompt": [1], "max_tokens": 1})", {{"Authorization", "Bearer s3cret"}})->status,
      200);
  EXPECT_TRUE(backend_.requests().size() == 1);
}

TEST_F(HttpServerTest, ClientGoneMidStreamCancelsTheRequest) {
  start();
  backend_.token_delay = 5ms;
  auto s = post_stream(server_->port(), "/v1/completions", R"({"prompt": [1], "max_tokens": 500, "stream": true})",
                       [](const testing::Streamed& so_far) { return so_far.chunks.size() < 3; });
  EXPECT_GE(s.chunks.size(), 3u);
  EXPECT_TRUE(eventually([&] { return backend_.cancelled() == 1 && backend_.running() == 0; }, 5s))
      << "cancelled " << backend_.cancelled() << ", running " << backend_.running();
}

TEST_F(HttpServerTest, ClientGoneBeforeTheFirstTokenCancels) {
  HttpOptions o;
  o.poll_interval = 10ms;
  start(o);
  backend_.first_token_delay = 20s;  // queued, as far as the client can tell
  for (bool stream : {true, false}) {
    RawConnection conn(server_->port());
    ASSERT_TRUE(conn.connected());
    const std::string body =
        std::string(R"({"prompt": [1], "max_tokens": 5, "stream": )") + (stream ? "true" : "false") + "}";
    ASSERT_TRUE(
        conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(eventually([&] { return backend_.running() == 1; }, 5s));
    conn.close();
    EXPECT_TRUE(eventually([&] { return backend_.running() == 0; }, 5s)) << (stream ? "stream" : "whole");
  }
  EXPECT_EQ(backend_.cancelled(), 2);
}

TEST_F(HttpServerTest, StalledClientIsDropped) {
  HttpOptions o;
  o.read_timeout = 300ms;
  // cpp-httplib answers a read that timed out with 400, then waits for the connection's next
  // request up to the keep-alive timeout before it closes.
  o.keep_alive_timeout = 1s;
  start(o);
  RawConnection slow(server_->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro"));
  // Others are served meanwhile.
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1], "max_tokens": 1})")->status, 200);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(slow.wait_closed(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_TRUE(backend_.requests().size() == 1);  // the stalled body never reached the runtime
  // Headers that never end are dropped too.
  RawConnection slower(server_->port());
  ASSERT_TRUE(slower.send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(slower.wait_closed(5s));
}

TEST_F(HttpServerTest, ManyConcurrentStreams) {
  start();
  backend_.token_delay = 3ms;
  constexpr int kStreams = 32;
  std::vector<testing::Streamed> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      const std::string body = R"({"prompt": [)" + std::to_string(i + 1) + "," + std::to_string(2 * i + 3) +
                               R"(], "max_tokens": 20, "stream": true, "return_token_ids": true})";
      results[size_t(i)] = post_stream(server_->port(), "/v1/completions", body);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    const auto& s = results[size_t(i)];
    ASSERT_EQ(s.status, 200) << i;
    std::vector<int32_t> ids;
    for (const auto& c : s.chunks) {
      auto t = c["choices"][0]["token_ids"].get<std::vector<int32_t>>();
      ids.insert(ids.end(), t.begin(), t.end());
    }
    EXPECT_EQ(ids, FakeBackend::default_ids({i + 1, 2 * i + 3}, 20, 1000)) << i;
    EXPECT_EQ(s.events.back(), "[DONE]");
  }
}

TEST_F(HttpServerTest, Metrics) {
  start();
  EXPECT_EQ(post("/v1/completions", R"({"prompt": [1], "max_tokens": 3})")->status, 200);
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x"})")->status, 400);
  // A response is counted once written (cpp-httplib's logger runs after the write): the client
  // may read /metrics before the count of the 400 it just got is in.
  std::string body, type;
  EXPECT_TRUE(eventually(
      [&] {
        auto r = client().Get("/metrics");
        if (!r || r->status != 200) return false;
        body = r->body;
        type = r->get_header_value("Content-Type");
        // The 200 of the completion too: its count may come after the 400's (other connection).
        return body.find("tunableop_http_responses_total{code=\"400\"} 1\n") != std::string::npos &&
               body.find("tunableop_http_responses_total{code=\"200\"} ") != std::string::npos;
      },
      5s));
  EXPECT_EQ(type.rfind("text/plain", 0), 0u);
  for (const char* line :
       {"tunableop_requests_running 0\n", "tunableop_requests_waiting 0\n", "tunableop_kv_pages_used 0\n",
        "tunableop_kv_pages_total 64\n", "tunableop_generation_tokens_total 3\n", "tunableop_prompt_tokens_total 0\n",
        "# TYPE tunableop_time_to_first_token_seconds histogram\n",
        "tunableop_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n",
        "tunableop_time_to_first_token_seconds_count 1\n", "# TYPE tunableop_time_per_output_token_seconds histogram\n",
        "tunableop_http_responses_total{code=\"200\"} ",  // the polls of /metrics count too
                                                          // "tunableop_http_responses_total{code=\"400\"} 1\n",
        "# TYPE tunableop_decode_step_seconds histogram\n", "# TYPE tunableop_prefill_step_seconds histogram\n",
        "# TYPE tunableop_host_turn_seconds histogram\n", "# TYPE tunableop_decode_rows_total counter\n",
        "# TYPE tunableop_decode_padded_rows_total counter\n", "tunableop_ready 1\n"}) {
    EXPECT_NE(body.find(line), std::string::npos) << line << "\n" << body;
  }
}

// With a tokenizer: text prompts, stop strings across tokens (the runtime told to stop), and
// streamed text that equals the whole answer's.
TEST_F(HttpServerTest, StopStringsOverHttp) {
  SERVE_TEST_TOKENIZER(tok);
  model_ = testing::served_model(tok, 512, 256);
  start();
  auto ids = tok->encode("The answer is 42. And then a long tail of words that nobody should read");
  backend_.script = [&](const GenerationRequest&) { return *ids; };
  auto prompt = tok->encode("Question:");
  prompt->insert(prompt->begin(), 1);  // BOS
  auto full = llm::decode_continuation(*tok, *prompt, *ids);
  ASSERT_TRUE(full.is_ok());
  const std::string want = full->substr(0, full->find("42."));
  backend_.token_delay = 2ms;
  auto whole = post("/v1/completions", R"({"prompt": "Question:", "max_tokens": 100, "stop": ["42."]})");
  ASSERT_EQ(whole->status, 200) << whole->body;
  auto j = json::parse(whole->body);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto s = post_stream(server_->port(), "/v1/completions",
                       R"({"prompt": "Question:", "max_tokens": 100, "stop": ["42."], "stream": true})");
  std::string text;
  for (const auto& c : s.chunks) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, want);
  EXPECT_EQ(s.chunks.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(eventually([&] { return backend_.cancelled() == 2 && backend_.running() == 0; }, 5s));
  // The prompt went through the tokenizer with BOS.
  EXPECT_EQ(backend_.requests()[0].prompt, *prompt);
}

TEST_F(HttpServerTest, ChatWithATemplate) {
  SERVE_TEST_TOKENIZER(tok);
  model_ = testing::served_model(tok, 512, 256);
  model_.chat_template = [](const std::vector<openai::ChatMessage>& m) -> StatusOr<std::string> {
    std::string s;
    for (const auto& x : m) s += x.role + ": " + x.content + "\n";
    return s + "assistant:";
  };
  start();
  auto ids = tok->encode("Hello there");
  backend_.script = [&](const GenerationRequest&) {
    auto v = *ids;
    v.push_back(2);  // EOS
    return v;
  };
  auto prompt = tok->encode("user: Hi\nassistant:");
  auto want = llm::decode_continuation(*tok, *prompt, *ids);
  ASSERT_TRUE(want.is_ok());
  auto r = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 50})");
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], *want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto s = post_stream(server_->port(), "/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 50, "stream": true})");
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(s.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const auto& c : s.chunks) text += c["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(text, *want);
  EXPECT_EQ(s.chunks.back()["choices"][0]["finish_reason"], "stop");
}

TEST_F(HttpServerTest, StopEndsWaitingHandlers) {
  HttpOptions o;
  o.poll_interval = 10ms;
  o.stop_grace = 100ms;
  start(o);
  backend_.first_token_delay = 30s;
  std::thread t([&] { post("/v1/completions", R"({"prompt": [1]})"); });
  ASSERT_TRUE(eventually([&] { return backend_.running() == 1; }, 5s));
  const auto t0 = std::chrono::steady_clock::now();
  server_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  t.join();
  EXPECT_TRUE(eventually([&] { return backend_.running() == 0; }, 5s));
  EXPECT_EQ(backend_.cancelled(), 1);
}

// After Backend::drain() the streams in flight only have their last events to write: stop()
// lets them, so a client never loses the end of an answer that was generated.
TEST_F(HttpServerTest, StopLetsStreamsInFlightEnd) {
  start();
  backend_.token_delay = 5ms;
  std::atomic<bool> started{false};
  testing::Streamed s;
  std::thread t([&] {
    s = post_stream(server_->port(), "/v1/completions", R"({"prompt": [1], "max_tokens": 40, "stream": true})",
                    [&](const testing::Streamed&) {
                      started = true;
                      return true;
                    });
  });
  ASSERT_TRUE(eventually([&] { return started.load(); }, 5s));
  server_->stop();
  t.join();
  EXPECT_EQ(s.status, 200);
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.back(), "[DONE]");
  size_t n = 0;
  for (const auto& c : s.chunks) n += c["choices"][0]["token_ids"].size();
  EXPECT_EQ(n, 40u);
  // Stopped: nothing listens any more.
  httplib::Client c("127.0.0.1", server_->port());
  EXPECT_FALSE(c.Get("/health"));
}

TEST_F(HttpServerTest, PortInUseIsAnError) {
  start();
  HttpOptions o;
  o.port = server_->port();
  HttpServer second(o);
  Status st = second.start();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(std::to_string(o.port)), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tunableop::serve::http
