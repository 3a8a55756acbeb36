// `tunableop serve` end to end on the CPU: the built binary on a tiny Llama directory with the
// test tokenizer, driven over HTTP. Greedy ids must equal `tunableop llm`'s for the same prompts
// (alone, streamed, and 24 at once), bad input gets its 4xx, a client that disconnects gives
// its pages back (read from /metrics), and SIGTERM drains and exits 0.
//
// ctest runs each test in a process of its own, and each starts a server (a second or two):
// the checks are grouped into few tests to keep CI's time small.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "cli_process.h"
#include "http/http_test_util.h"
#include "serve_process.h"
#include "text_test_util.h"

namespace tunableop::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using serve::testing::eventually;
using serve::testing::post_stream;
using serve::testing::Streamed;

constexpr int kNewTokens = 6;

class ServeCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<llm::testing::ScratchDir>("serve_e2e");
    dir_ = scratch_->path() + "/model";
    std::filesystem::create_directories(dir_);
    // The test tokenizer's tiny Llama, with a context of 4096 so that a long answer takes long
    // enough to hang up in the middle of.
    llm::ModelConfig c = llm::testing::text_llama();
    c.max_position_embeddings = 4096;
    ASSERT_TRUE(llm::save_model(llm::make_random_weights(c, 3, "serve-llama"), dir_).is_ok());
    if (llm::tokenizer_available())
      std::filesystem::copy_file(llm::testing::tokenizer_fixture(), dir_ + "/tokenizer.model");
    std::ofstream(dir_ + "/generation_config.json") << R"({"bos_token_id": 1, "eos_token_id": 2})";
    // 8 running at most (the 24 concurrent requests queue), small prefill passes: a quick warm-up.
    // Decode buckets 1, 2, 3, 6, 8 (--decode-bucket-step 3): steps padded to sizes that are not
    // powers of two give the same ids.
    ASSERT_TRUE(server_.start(server_args())) << server_.error();
  }
  virtual std::vector<std::string> server_args() const {
    return {"--model",   dir_,
            "--device",  "cpu",
            "--no-tune", "--max-running",
            "8",         "--prefill-tokens",
            "128",       "--decode-bucket-step",
            "3"};
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", server_.port());
    c.set_read_timeout(60s);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body) {
    return client().Post(path.c_str(), body.dump(), "application/json");
  }

  // The prompts `tunableop llm --prompt-lens a,b,...` makes: the first n of one synthetic sequence.
  static std::vector<int32_t> synthetic_prompt(int64_t n) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(int32_t((1 + 7919 * i) % llm::testing::kTestVocab));
    return p;
  }

  // `tunableop llm`'s greedy new ids for synthetic prompts of these lengths: one batch, ids in,
  // ids out, not stopping at EOS; one line of ids per prompt.
  std::vector<std::vector<int32_t>> llm_greedy(const std::vector<int64_t>& lengths) {
    std::string lens;
    for (int64_t n : lengths) {
      if (!lens.empty()) lens += ',';
      lens += std::to_string(n);
    }
    CliRun r = run_cli({"llm", "--model", dir_, "--mode", "generate", "--prompt-lens", lens, "--max-new-tokens",
                        std::to_string(kNewTokens), "--ignore-eos", "--no-tune"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    std::vector<std::vector<int32_t>> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      std::vector<int32_t> v;
      std::stringstream ss(line);
      for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stoi(item));
      out.push_back(v);
    }
    EXPECT_EQ(out.size(), lengths.size()) << r.out;
    return out;
  }

  static json completion(const std::vector<int32_t>& prompt, bool stream) {
    return json{{"prompt", prompt},   {"max_tokens", kNewTokens}, {"temperature", 0},
                {"ignore_eos", true}, {"stream", stream},         {"return_token_ids", true}};
  }

  // The metric's value in /metrics, or -1.
  double metric(const std::string& name) {
    auto r = client().Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::smatch m;
    const std::regex re("\n" + name + " ([0-9.e+-]+)\n");
    return std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1;
  }

  static std::vector<int32_t> streamed_ids(const Streamed& s) {
    std::vector<int32_t> ids;
    for (const auto& c : s.chunks)
      for (const auto& ch : c["choices"]) {
        auto t = ch.value("token_ids", std::vector<int32_t>{});
        ids.insert(ids.end(), t.begin(), t.end());
      }
    return ids;
  }

  std::unique_ptr<llm::testing::ScratchDir> scratch_;
  std::string dir_;
  ServeProcess server_;
};

TEST_F(ServeCommand, GreedyIdsEqualLlmsAloneStreamedAnd24AtOnce) {
  constexpr int kConcurrent = 24;
  std::vector<int64_t> lengths;
  for (int i = 0; i < kConcurrent; ++i) lengths.push_back(2 + i);
  const auto want = llm_greedy(lengths);
  ASSERT_EQ(want.size(), size_t(kConcurrent));
  // Alone: whole and streamed.
  for (int i : {0, 9}) {
    auto r = post("/v1/completions", completion(synthetic_prompt(lengths[size_t(i)]), false));
    ASSERT_EQ(r->status, 200) << r->body;
    auto j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want[size_t(i)]) << i;
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], kNewTokens);
    auto s =
        post_stream(server_.port(), "/v1/completions", completion(synthetic_prompt(lengths[size_t(i)]), true).dump());
    ASSERT_EQ(s.status, 200) << s.raw;
    EXPECT_EQ(streamed_ids(s), want[size_t(i)]) << i;
    EXPECT_EQ(s.events.back(), "[DONE]");
  }
  // 24 at once, half streamed.
  std::vector<std::vector<int32_t>> got(kConcurrent);
  std::vector<std::thread> threads;
  for (int i = 0; i < kConcurrent; ++i) {
    threads.emplace_back([&, i] {
      const bool stream = i % 2 == 0;
      auto s = post_stream(server_.port(), "/v1/completions",
                           completion(synthetic_prompt(lengths[size_t(i)]), stream).dump());
      if (stream) {
        got[size_t(i)] = streamed_ids(s);
      } else if (s.status == 200) {
        got[size_t(i)] = json::parse(s.raw)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kConcurrent; ++i) EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "request " << i;

  // A text prompt: the same ids as `tunableop llm --prompt` (BOS added as it adds it).
  if (!llm::tokenizer_available()) return;
  CliRun r = run_cli({"llm", "--model", dir_, "--prompt", "Hello Earthlings!", "--max-new-tokens",
                      std::to_string(kNewTokens), "--ignore-eos", "--no-tune", "--print-ids"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("ids: ([0-9,]+)"))) << r.out;
  auto text = post("/v1/completions", json{{"prompt", "Hello Earthlings!"},
                                           {"max_tokens", kNewTokens},
                                           {"temperature", 0},
                                           {"ignore_eos", true},
                                           {"return_token_ids", true}});
  ASSERT_EQ(text->status, 200) << text->body;
  auto j = json::parse(text->body);
  std::string ids;
  for (int32_t id : j["choices"][0]["token_ids"].get<std::vector<int32_t>>()) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);
  }
  EXPECT_EQ(ids, m[1].str());
  EXPECT_EQ(j["choices"][0]["prompt_token_ids"][0], 1);  // BOS
}

TEST_F(ServeCommand, ReadyLineBadInputsAndDisconnect) {
  EXPECT_NE(server_.ready_line().find("http://127.0.0.1:"), std::string::npos) << server_.ready_line();
  EXPECT_NE(server_.stderr_text().find("decode at batch 1,2,3,6,8 "), std::string::npos) << server_.stderr_text();
  auto c = client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  auto models = json::parse(c.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], dir_);
  EXPECT_EQ(models["data"][0]["vocab_size"], llm::testing::kTestVocab);
  EXPECT_GT(models["data"][0]["max_model_len"].get<int64_t>(), kNewTokens);

  auto status = [&](const std::string& body) {
    auto r = c.Post("/v1/completions", body, "application/json");
    return r ? r->status : -1;  // -1: no answer (the connection failed)
  };
  EXPECT_EQ(status("{not json"), 400);
  EXPECT_EQ(status(std::string(100000, '[')), 400);
  EXPECT_EQ(status(R"({"prompt": [1], "temperature": NaN})"), 400);
  EXPECT_EQ(status(R"({"prompt": [1], "max_tokens": 1e999})"), 400);
  EXPECT_EQ(status(R"({"prompt": [1], "max_tokens": "3"})"), 400);
  EXPECT_EQ(status(R"({"max_tokens": 3})"), 400);
  EXPECT_EQ(status(R"({"prompt": [1, 512]})"), 400);                    // the vocabulary has 512 ids
  EXPECT_EQ(status(R"({"prompt": [1, 2], "max_tokens": 5000})"), 400);  // past the context of 4096
  EXPECT_EQ(status(R"({"prompt": [1], "n": 3})"), 400);
  EXPECT_EQ(status(R"({"prompt": [1], "model": "other"})"), 404);
  EXPECT_EQ(c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", "application/json")
                ->status,
            400);
  EXPECT_EQ(status(R"({"prompt": [1], "user": ")" + std::string(5 << 20, 'x') + "\"}"), 413);
  EXPECT_EQ(c.Get("/v1/completions")->status, 405);
  EXPECT_EQ(c.Get("/nope")->status, 404);
  EXPECT_EQ(c.Get("/health")->status, 200);  // still serving

  // A client that hangs up mid-stream: its pages go back.
  ASSERT_TRUE(eventually([&] { return metric("tunableop_kv_pages_used") == 0; }, 30s));
  ASSERT_GT(metric("tunableop_kv_pages_total"), 0);
  double during = -1;
  auto s = post_stream(server_.port(), "/v1/completions",
                       json{{"prompt", {1, 2, 3}}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}.dump(),
                       [&](const Streamed& so_far) {
                         if (so_far.chunks.size() < 3) return true;
                         during = metric("tunableop_kv_pages_used");
                         return false;  // hang up
                       });
  EXPECT_GT(during, 0);
  EXPECT_TRUE(eventually(
      [&] { return metric("tunableop_kv_pages_used") == 0 && metric("tunableop_requests_running") == 0; }, 30s))
      << "pages still used: " << metric("tunableop_kv_pages_used");
  EXPECT_GE(metric("tunableop_requests_cancelled_total"), 1);
}

// One sequence running and one waiting at most: a third request is refused with 429 (the
// runtime's queue bounds the load); then SIGTERM lets both finish and exits 0.
class ServeCommandQueue : public ServeCommand {
 protected:
  std::vector<std::string> server_args() const override {
    return {"--model",       dir_, "--device",         "cpu", "--no-tune", "--max-running", "1",
            "--max-waiting", "1",  "--prefill-tokens", "64"};
  }
};

TEST_F(ServeCommandQueue, QueueFullIs429AndSigtermDrainsAndExitsZero) {
  constexpr int kLong = 2000;  // long enough to still run while the rest of the test happens
  Streamed running;
  std::atomic<bool> first_chunk{false};
  std::thread a([&] {
    running = post_stream(server_.port(), "/v1/completions",
                          json{{"prompt", {1, 2}},
                               {"max_tokens", kLong},
                               {"ignore_eos", true},
                               {"stream", true},
                               {"return_token_ids", true}}
                              .dump(),
                          [&](const Streamed&) {
                            first_chunk = true;
                            return true;
                          });
  });
  ASSERT_TRUE(eventually([&] { return first_chunk.load(); }, 30s));
  int waited_status = 0;
  std::thread b([&] {
    auto r = post("/v1/completions", completion({1, 3}, false));
    waited_status = r ? r->status : -1;
  });
  ASSERT_TRUE(eventually([&] { return metric("tunableop_requests_waiting") == 1; }, 30s));
  auto full = post("/v1/completions", completion({1, 4}, false));
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");

  EXPECT_EQ(server_.stop(SIGTERM), 0) << server_.stderr_text();
  a.join();
  b.join();
  EXPECT_EQ(running.status, 200);
  ASSERT_FALSE(running.events.empty());
  EXPECT_EQ(running.events.back(), "[DONE]");
  EXPECT_EQ(streamed_ids(running).size(), size_t(kLong));  // finished within the grace, not cut
  EXPECT_EQ(waited_status, 200);                           // the queued one too
}

TEST(ServeCommandArgs, BadArgumentsExitTwo) {
  CliRun r = run_cli({"serve", "--model", "builtin:nosuch", "--port", "0"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"serve", "--tune", "--no-tune", "--port", "0"}).exit_code, 2);
  CliRun tp = run_cli({"serve", "--tp", "0", "--port", "0"});
  EXPECT_EQ(tp.exit_code, 2);
  EXPECT_NE(tp.err.find("--tp"), std::string::npos) << tp.err;
  CliRun step = run_cli({"serve", "--decode-bucket-step", "0", "--port", "0"});
  EXPECT_EQ(step.exit_code, 2);
  EXPECT_NE(step.err.find("--decode-bucket-step"), std::string::npos) << step.err;
}

}  // namespace
}  // namespace tunableop::testing
