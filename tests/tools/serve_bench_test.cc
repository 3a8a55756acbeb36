// `tunableop bench serve`: the synthetic workload, the event parser and the statistics as units,
// and the command end to end against an in-process server over a fake Backend (which streams
// exactly max_tokens ids, so every count is known).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_serve_workload.h"
#include "cli_process.h"
#include "fake_backend.h"
#include "serve/http/server.h"
#include "serve_test_util.h"

namespace tunableop::cli::bench_serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

TEST(BenchServeWorkload, SeededAndWithinTheClip) {
  WorkloadOptions o;
  o.requests = 500;
  o.seed = 7;
  o.vocab_size = 1000;
  const Workload a = make_workload(o), b = make_workload(o);
  ASSERT_EQ(a.items.size(), 500u);
  for (size_t i = 0; i < a.items.size(); ++i) {
    EXPECT_EQ(a.items[i].prompt, b.items[i].prompt);
    EXPECT_EQ(a.items[i].max_tokens, b.items[i].max_tokens);
    EXPECT_GE(a.items[i].prompt.size(), 16u);
    EXPECT_LE(a.items[i].prompt.size(), 1024u);
    EXPECT_GE(a.items[i].max_tokens, 16);
    EXPECT_LE(a.items[i].max_tokens, 1024);
    EXPECT_EQ(a.items[i].arrival_s, 0.0);  // rate 0: all at once
    for (int32_t id : a.items[i].prompt) ASSERT_TRUE(id >= 0 && id < 1000);
  }
  o.seed = 8;
  const Workload c = make_workload(o);
  EXPECT_NE(a.items[0].prompt, c.items[0].prompt);
}

TEST(BenchServeWorkload, LognormalAndPoissonMoments) {
  WorkloadOptions o;
  o.requests = 20000;
  o.seed = 1;
  o.vocab_size = 10;
  o.rate = 8;
  o.min_len = 1;
  o.max_len = 1 << 30;  // no clip: the log-lengths' moments are the parameters
  const Workload w = make_workload(o);
  double sp = 0, sp2 = 0, so = 0;
  for (const auto& it : w.items) {
    const double lp = std::log(double(it.prompt.size()));
    sp += lp;
    sp2 += lp * lp;
    so += std::log(double(it.max_tokens));
  }
  const double n = double(w.items.size());
  EXPECT_NEAR(sp / n, 5.3, 0.03);
  EXPECT_NEAR(std::sqrt(sp2 / n - (sp / n) * (sp / n)), 0.8, 0.03);
  EXPECT_NEAR(so / n, 5.0, 0.03);
  // Poisson at 8/s: the last arrival near n / 8 s, gaps exponential (mean 1/8 s).
  EXPECT_NEAR(w.items.back().arrival_s / n, 1.0 / 8, 0.005);
}

TEST(BenchServeWorkload, OutputsCutToTheContext) {
  WorkloadOptions o;
  o.requests = 200;
  o.vocab_size = 100;
  o.max_context = 300;
  const Workload w = make_workload(o);
  int64_t cut = 0;
  for (const auto& it : w.items) {
    EXPECT_LE(int64_t(it.prompt.size()) + it.max_tokens, 300);
    EXPECT_GE(it.max_tokens, 1);
  }
  for (const auto& it : w.items) cut += int64_t(it.prompt.size()) + it.max_tokens == 300;
  EXPECT_GT(w.cut_to_context, 0);
  EXPECT_LE(w.cut_to_context, cut);
}

TEST(BenchServeSse, AnySplitGivesTheSameEvents) {
  const std::string stream = "data: {\"a\": 1}\n\ndata: {\"b\": \"x\\ny\"}\n\n: comment\n\ndata: [DONE]\n\n";
  std::vector<std::string> whole;
  SseParser p([&](std::string_view d) { whole.emplace_back(d); });
  p.feed(stream);
  ASSERT_EQ(whole, (std::vector<std::string>{"{\"a\": 1}", "{\"b\": \"x\\ny\"}", "[DONE]"}));
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    std::vector<std::string> got;
    SseParser q([&](std::string_view d) { got.emplace_back(d); });
    q.feed(stream.substr(0, cut));
    q.feed(stream.substr(cut));
    EXPECT_EQ(got, whole) << cut;
  }
}

TEST(BenchServeStats, PercentilesAndSummary) {
  auto p = percentiles({4, 1, 3, 2, 5});
  EXPECT_EQ(p.n, 5);
  EXPECT_DOUBLE_EQ(p.mean, 3);
  EXPECT_DOUBLE_EQ(p.p50, 3);
  EXPECT_DOUBLE_EQ(p.p90, 4.6);
  EXPECT_DOUBLE_EQ(p.p99, 4.96);
  EXPECT_EQ(percentiles({}).n, 0);
  std::vector<RequestResult> r(3);
  r[0] = {true, "", 10, 5, 0.1, 0.5, {0.1, 0.1, 0.1, 0.1}};
  r[1] = {true, "", 20, 3, 0.2, 0.4, {0.1, 0.1}};
  r[2].error = "http_429";
  const Summary s = summarize(r, 2.0);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.errors.at("http_429"), 1);
  EXPECT_EQ(s.output_tokens, 8);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 4);
  EXPECT_DOUBLE_EQ(s.total_tokens_per_s, 19);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1);
  EXPECT_DOUBLE_EQ(s.ttft_ms.mean, 150);
  EXPECT_DOUBLE_EQ(s.tpot_ms.p50, 100);  // (0.5-0.1)/4 and (0.4-0.2)/2
  EXPECT_EQ(s.itl_ms.n, 6);
  auto j = json::parse(summary_json(s, R"({"seed": 3})"));
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["errors"]["http_429"], 1);
  EXPECT_DOUBLE_EQ(j["tpot_ms"]["p50"].get<double>(), 100);
  EXPECT_NE(format_table(s).find("http_429 1"), std::string::npos);
}

class BenchServeCommand : public ::testing::Test {
 protected:
  void start(const std::string& key = "") {
    backend_.token_delay = 1ms;
    serve::http::HttpOptions o;
    o.port = 0;
    o.api_key = key;
    server_ = std::make_unique<serve::http::HttpServer>(o);
    ASSERT_TRUE(server_->start().is_ok());
    server_->attach(backend_, serve::testing::served_model(nullptr, 1000, 1500));
    json_ = ::testing::TempDir() + "/bench_serve_" + std::to_string(::getpid()) + ".json";
  }
  void TearDown() override { std::filesystem::remove(json_); }
  testing::CliRun bench(std::vector<std::string> extra) {
    std::vector<std::string> args = {"bench",  "serve", "--url", "http://127.0.0.1:" + std::to_string(server_->port()),
                                     "--json", json_};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_cli(args);
  }
  json result() {
    std::ifstream in(json_);
    return json::parse(in);
  }

  serve::testing::FakeBackend backend_;
  std::unique_ptr<serve::http::HttpServer> server_;
  std::string json_;
};

TEST_F(BenchServeCommand, CountsEveryTokenOfTheWorkload) {
  start();
  auto r = bench({"--requests", "12", "--rate", "inf", "--concurrency", "6", "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  for (const char* row : {"TTFT", "TPOT", "ITL", "E2E", "output tokens/s"})
    EXPECT_NE(r.out.find(row), std::string::npos) << r.out;
  auto j = result();
  EXPECT_EQ(j["completed"], 12);
  EXPECT_TRUE(j["errors"].empty());
  // The server got the workload's lengths, and the client counted exactly them.
  WorkloadOptions o;
  o.requests = 12;
  o.seed = 3;
  o.vocab_size = 1000;
  o.max_context = 1500;
  const Workload w = make_workload(o);
  int64_t prompt = 0, output = 0;
  for (const auto& it : w.items) prompt += int64_t(it.prompt.size()), output += it.max_tokens;
  EXPECT_EQ(j["prompt_tokens"], prompt);
  EXPECT_EQ(j["output_tokens"], output);
  EXPECT_EQ(j["rate"], "inf");
  EXPECT_EQ(j["concurrency"], 6);
  const auto reqs = backend_.requests();
  ASSERT_EQ(reqs.size(), 12u);
  for (const auto& q : reqs) {
    EXPECT_TRUE(q.ignore_eos);
    EXPECT_EQ(q.sampling.temperature, 0.0);
  }
  EXPECT_GT(j["ttft_ms"]["p50"].get<double>(), 0);
  EXPECT_GT(j["itl_ms"]["n"].get<int64_t>(), 0);
}

TEST_F(BenchServeCommand, PoissonRateAndApiKey) {
  start("k3y");
  auto denied = bench({"--requests", "2"});
  EXPECT_EQ(denied.exit_code, 2);
  EXPECT_NE(denied.err.find("401"), std::string::npos) << denied.err;
  auto r = bench({"--requests", "6", "--rate", "50", "--api-key", "k3y"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_EQ(result()["rate"], 50.0);
  EXPECT_EQ(result()["completed"], 6);
}

TEST_F(BenchServeCommand, ErrorsAreCountedByKind) {
  start();
  // Answers shorter than asked although ignore_eos was set: counted, not trusted.
  backend_.script = [](const serve::GenerationRequest&) { return std::vector<int32_t>{1, 2, 3}; };
  auto r = bench({"--requests", "3"});
  EXPECT_EQ(r.exit_code, 1) << testing::describe(r);
  EXPECT_EQ(result()["errors"]["wrong_length"], 3);
  backend_.script = nullptr;
  backend_.submit_error = Status::resource_exhausted("queue full");
  r = bench({"--requests", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(result()["errors"]["http_429"], 2);
  auto bad_rate = bench({"--rate", "fast"});
  EXPECT_EQ(bad_rate.exit_code, 2);
  EXPECT_NE(bad_rate.err.find("--rate"), std::string::npos);
}

}  // namespace
}  // namespace tunableop::cli::bench_serve
