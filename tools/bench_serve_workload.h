// `tunableop bench serve`'s pure parts (no sockets; tested alone): the seeded synthetic
// workload, a server-sent-events parser, and the statistics of a run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tunableop::cli::bench_serve {

// Prompt and output lengths lognormal(mu, sigma) rounded and clipped to [lo, hi]; prompts as
// uniform random token ids; arrivals Poisson at `rate` per second (rate <= 0 or inf: all at 0).
struct WorkloadOptions {
  int64_t requests = 100;
  double rate = 0;  // requests per second; 0: all at once
  uint64_t seed = 0;
  int64_t vocab_size = 0;
  int64_t max_context = 0;  // prompt + output of one request at most (the output is cut to fit)
  double prompt_mu = 5.3, prompt_sigma = 0.8, output_mu = 5.0, output_sigma = 0.7;
  int64_t min_len = 16, max_len = 1024;
};

struct WorkItem {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  double arrival_s = 0;  // after the start of the run
};

struct Workload {
  std::vector<WorkItem> items;
  int64_t cut_to_context = 0;  // requests whose output was shortened to fit max_context
};

// The same options give the same workload on every platform (our own normal and exponential
// draws over mt19937_64: the standard distributions are implementation-defined).
Workload make_workload(const WorkloadOptions& o);

// Splits a stream of bytes into server-sent events and hands each event's data to `on_data`
// ("[DONE]" included); the pieces may split anywhere.
class SseParser {
 public:
  explicit SseParser(std::function<void(std::string_view data)> on_data) : on_data_(std::move(on_data)) {}
  void feed(std::string_view bytes);

 private:
  std::function<void(std::string_view)> on_data_;
  std::string buffer_;
};

// What one request measured (times in seconds from its send).
struct RequestResult {
  bool ok = false;
  std::string error;  // the kind: "connect", "http_429", "stream_error", "wrong_length", ...
  int64_t prompt_tokens = 0, output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;  // gaps between consecutive events that carried tokens
};

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  int64_t n = 0;
};
// Linear interpolation between order statistics (numpy's default); zeros for no samples.
Percentiles percentiles(std::vector<double> v);

struct Summary {
  int64_t requests = 0, completed = 0;
  std::map<std::string, int64_t> errors;
  double duration_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  double requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
  Percentiles ttft_ms, tpot_ms, itl_ms, e2e_ms;
};
// `duration_s`: from the first send to the last answer.
Summary summarize(const std::vector<RequestResult>& results, double duration_s);

std::string format_table(const Summary& s);
// The summary as JSON fields (one object), `config` merged in.
std::string summary_json(const Summary& s, const std::string& config_json);

}  // namespace tunableop::cli::bench_serve
