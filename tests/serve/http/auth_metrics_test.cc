// The API key check and the Prometheus text, as units.
#include <gtest/gtest.h>

#include "serve/http/auth.h"
#include "serve/http/metrics.h"

namespace tunableop::serve::http {
namespace {

TEST(Auth, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abd", "abc"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("abcd", "abc"));
  EXPECT_FALSE(constant_time_equal("", "abc"));
  EXPECT_FALSE(constant_time_equal(std::string_view("ab\0", 3), "ab"));
}

TEST(Auth, BearerHeader) {
  EXPECT_TRUE(bearer_matches("Bearer k3y", "k3y"));
  EXPECT_TRUE(bearer_matches("bearer k3y", "k3y"));
  EXPECT_TRUE(bearer_matches("BEARER  k3y", "k3y"));
  EXPECT_FALSE(bearer_matches("Bearer k3y ", "k3y"));
  EXPECT_FALSE(bearer_matches("Basic k3y", "k3y"));
  EXPECT_FALSE(bearer_matches("k3y", "k3y"));
  EXPECT_FALSE(bearer_matches("", "k3y"));
  EXPECT_FALSE(bearer_matches("Bearer ", "k3y"));
}

TEST(Metrics, PrometheusText) {
  RuntimeStats s;
  s.ready = true;
  s.requests_running = 3;
  s.requests_waiting = 2;
  s.kv_pages_used = 10;
  s.kv_pages_total = 100;
  s.kv_pages_peak = 42;
  s.prompt_tokens = 1234;
  s.generation_tokens = 99;
  s.ttft.observe(0.004);
  s.ttft.observe(0.2);
  s.ttft.observe(100);  // past the last bound: +Inf only
  const std::string t = prometheus_text(s, {{200, 5}, {429, 1}});
  for (const char* line :
       {"# TYPE tunableop_requests_running gauge\ntunableop_requests_running 3\n", "tunableop_requests_waiting 2\n",
        "tunableop_kv_pages_used 10\n", "tunableop_kv_pages_total 100\n", "tunableop_kv_pages_peak 42\n",
        "# TYPE tunableop_prompt_tokens_total counter\ntunableop_prompt_tokens_total 1234\n",
        "tunableop_generation_tokens_total 99\n", "tunableop_time_to_first_token_seconds_bucket{le=\"0.001\"} 0\n",
        "tunableop_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n",
        "tunableop_time_to_first_token_seconds_bucket{le=\"0.2\"} 2\n",
        "tunableop_time_to_first_token_seconds_bucket{le=\"60\"} 2\n",
        "tunableop_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n",
        "tunableop_time_to_first_token_seconds_count 3\n", "tunableop_time_to_first_token_seconds_sum 100.204\n",
        "tunableop_http_responses_total{code=\"200\"} 5\n", "tunableop_http_responses_total{code=\"429\"} 1\n",
        "tunableop_ready 1\n", "tunableop_draining 0\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << line << "\n---\n" << t;
  }
  // Every sample line is NAME[{labels}] VALUE; every metric has HELP and TYPE.
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) continue;
    EXPECT_EQ(line.find("tunableop_"), 0u) << line;
    EXPECT_NE(line.rfind(' '), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace tunableop::serve::http
