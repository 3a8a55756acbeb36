// `tunableop bench serve --url URL`: a load generator for an OpenAI-compatible server (ours or
// any other that takes vLLM's ignore_eos and return_token_ids). The built-in synthetic workload
// (bench_serve_workload.h: seeded lognormal prompt and output lengths, random token ids,
// Poisson arrivals) is sent as streamed /v1/completions requests, at most --concurrency in
// flight; every token event is timed client-side. Prints a table (and --json FILE).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_serve_workload.h"
#include "cli_support.h"
#include "commands.h"
#include "tunableop/safe_file.h"
#ifdef TUNABLEOP_HAVE_HTTPLIB
#include <httplib.h>
#endif

namespace tunableop::cli {

namespace {

using namespace bench_serve;
using SteadyClock = std::chrono::steady_clock;

struct BenchServeArgs {
  std::string url = "http://127.0.0.1:8000";
  int64_t requests = 100;
  std::string rate = "inf";
  int64_t concurrency = 0;
  uint64_t seed = 0;
  std::string api_key;
  std::string json_file;
  std::string save_workload;  // the requests as JSON, for a peer to run the same ones
  double timeout_s = 600;
};

int fail(const std::string& message) {
  fmt::print(stderr, "tunableop bench serve: {}\n", printable(message));
  return 2;
}

#ifdef TUNABLEOP_HAVE_HTTPLIB

httplib::Headers auth_headers(const BenchServeArgs& a) {
  httplib::Headers h;
  if (!a.api_key.empty()) h.emplace("Authorization", "Bearer " + a.api_key);
  return h;
}

struct ServedInfo {
  std::string model;
  int64_t vocab_size = 0, max_context = 0;
};

// GET /v1/models: the first model, its vocabulary (our vocab_size) and context (max_model_len).
bool probe(const BenchServeArgs& a, ServedInfo* info, std::string* error) {
  httplib::Client cli(a.url);
  cli.set_connection_timeout(std::chrono::seconds(10));
  cli.set_read_timeout(std::chrono::seconds(30));
  auto res = cli.Get("/v1/models", auth_headers(a));
  if (!res) {
    *error = fmt::format("GET {}/v1/models: {}", a.url, httplib::to_string(res.error()));
    return false;
  }
  if (res->status != 200) {
    *error = fmt::format("GET {}/v1/models: HTTP {}: {}", a.url, res->status, res->body.substr(0, 500));
    return false;
  }
  try {
    const auto j = nlohmann::json::parse(res->body);
    const auto& m = j.at("data").at(0);
    info->model = m.at("id").get<std::string>();
    if (!m.contains("vocab_size")) {
      *error = "the server's /v1/models gives no vocab_size: random prompts need the vocabulary's size";
      return false;
    }
    info->vocab_size = m.at("vocab_size").get<int64_t>();
    info->max_context = m.value("max_model_len", int64_t(0));
  } catch (const std::exception& e) {
    *error = fmt::format("GET {}/v1/models: unexpected answer ({}): {}", a.url, e.what(), res->body.substr(0, 500));
    return false;
  }
  return true;
}

const char* error_kind(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "connection";
    case httplib::Error::Read: return "read";
    case httplib::Error::Write: return "write";
    case httplib::Error::ConnectionTimeout: return "connection_timeout";
    case httplib::Error::Canceled: return "canceled";
    default: return "client";
  }
}

// One streamed completion of `item`, timed from the send.
RequestResult run_one(const BenchServeArgs& a, const ServedInfo& info, const WorkItem& item) {
  RequestResult r;
  r.prompt_tokens = int64_t(item.prompt.size());
  const nlohmann::json body = {{"model", info.model},     {"prompt", item.prompt}, {"max_tokens", item.max_tokens},
                               {"temperature", 0.0},      {"ignore_eos", true},    {"stream", true},
                               {"return_token_ids", true}};
  httplib::Client cli(a.url);
  cli.set_connection_timeout(std::chrono::seconds(30));
  cli.set_read_timeout(std::chrono::milliseconds(int64_t(a.timeout_s * 1000)));
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = auth_headers(a);
  req.headers.emplace("Content-Type", "application/json");
  req.body = body.dump();
  bool done = false, stream_error = false;
  double last_token = 0;
  std::string raw;
  const auto t0 = SteadyClock::now();
  SseParser parser([&](std::string_view data) {
    const double now = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    if (data == "[DONE]") {
      done = true;
      return;
    }
    try {
      const auto j = nlohmann::json::parse(data);
      if (j.contains("error")) {
        stream_error = true;
        return;
      }
      int64_t n = 0;
      for (const auto& c : j.value("choices", nlohmann::json::array())) {
        if (c.contains("token_ids")) n += int64_t(c["token_ids"].size());
      }
      if (n == 0) return;
      if (r.output_tokens == 0) {
        r.ttft = now;
      } else {
        r.itl.push_back(now - last_token);
      }
      last_token = now;
      r.output_tokens += n;
    } catch (const std::exception&) {
      stream_error = true;
    }
  });
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (raw.size() < 4096) raw.append(data, std::min<size_t>(n, 4096));
    parser.feed(std::string_view(data, n));
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  r.e2e = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  if (!sent) {
    r.error = error_kind(err);
  } else if (res.status != 200) {
    r.error = fmt::format("http_{}", res.status);
  } else if (stream_error) {
    r.error = "stream_error";
  } else if (!done) {
    r.error = "truncated";
  } else if (r.output_tokens != item.max_tokens) {
    r.error = "wrong_length";  // ignore_eos asked for exactly max_tokens
  } else {
    r.ok = true;
  }
  return r;
}

int run_bench_serve(const BenchServeArgs& a) {
  std::signal(SIGPIPE, SIG_IGN);
  double rate = 0;
  if (a.rate != "inf") {
    try {
      size_t used = 0;
      rate = std::stod(a.rate, &used);
      if (used != a.rate.size() || !(rate > 0) || !std::isfinite(rate)) throw std::invalid_argument(a.rate);
    } catch (const std::exception&) {
      return fail("--rate must be a positive number of requests per second or inf (got " + a.rate + ")");
    }
  }
  ServedInfo info;
  std::string error;
  if (!probe(a, &info, &error)) return fail(error);
  WorkloadOptions wo;
  wo.requests = a.requests;
  wo.rate = rate;
  wo.seed = a.seed;
  wo.vocab_size = info.vocab_size;
  wo.max_context = info.max_context;
  const Workload w = make_workload(wo);
  if (!a.save_workload.empty()) {
    nlohmann::json items = nlohmann::json::array();
    for (const WorkItem& it : w.items) items.push_back({{"prompt", it.prompt}, {"max_tokens", it.max_tokens}});
    if (Status st = replace_regular_file(a.save_workload, items.dump()); !st.is_ok()) return fail(st.to_string());
  }
  const int64_t workers = std::min<int64_t>(a.concurrency > 0 ? a.concurrency : a.requests, a.requests);
  fmt::print(
      stderr, "tunableop bench serve: {} requests to {} (model {}), rate {}, concurrency {}, seed {}{}\n", a.requests,
      a.url, info.model, a.rate, a.concurrency > 0 ? std::to_string(a.concurrency) : "unlimited", a.seed,
      w.cut_to_context ? fmt::format(" ({} outputs cut to the context of {})", w.cut_to_context, info.max_context)
                       : "");

  std::vector<RequestResult> results(w.items.size());
  std::atomic<size_t> next{0};
  const auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  threads.reserve(size_t(workers));
  for (int64_t t = 0; t < workers; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < w.items.size(); i = next++) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<SteadyClock::duration>(
                                                  std::chrono::duration<double>(w.items[i].arrival_s)));
        results[i] = run_one(a, info, w.items[i]);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double duration = std::chrono::duration<double>(SteadyClock::now() - start).count();

  const Summary s = summarize(results, duration);
  fmt::print("{}", format_table(s));
  if (!a.json_file.empty()) {
    int64_t prompt_sum = 0, output_sum = 0;
    for (const auto& item : w.items) {
      prompt_sum += int64_t(item.prompt.size());
      output_sum += item.max_tokens;
    }
    const nlohmann::json config = {{"url", a.url},
                                   {"model", info.model},
                                   {"rate", rate > 0 ? nlohmann::json(rate) : nlohmann::json("inf")},
                                   {"concurrency", a.concurrency},
                                   {"seed", a.seed},
                                   {"workload",
                                    {{"prompt_lognormal", {wo.prompt_mu, wo.prompt_sigma}},
                                     {"output_lognormal", {wo.output_mu, wo.output_sigma}},
                                     {"clip", {wo.min_len, wo.max_len}},
                                     {"mean_prompt_tokens", a.requests ? double(prompt_sum) / double(a.requests) : 0.0},
                                     {"mean_output_tokens", a.requests ? double(output_sum) / double(a.requests) : 0.0},
                                     {"outputs_cut_to_context", w.cut_to_context}}}};
    std::ofstream out(a.json_file);
    out << summary_json(s, config.dump()) << "\n";
    if (!out) return fail("cannot write " + a.json_file);
  }
  return s.completed == s.requests ? 0 : 1;
}

#else

int run_bench_serve(const BenchServeArgs&) {
  return fail("this build has no HTTP client: install libcpp-httplib-dev (scripts/install-deps.sh) and rebuild");
}

#endif

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* c = bench.add_subcommand(
      "serve", "Load an OpenAI-compatible server with the synthetic workload and report throughput and latency");
  c->add_option("--url", a->url, "the server, scheme://host:port")->capture_default_str();
  c->add_option("--requests", a->requests, "requests to send")->check(at_least(1))->capture_default_str();
  c->add_option("--rate", a->rate, "Poisson arrivals per second, or inf: all at once")->capture_default_str();
  c->add_option("--concurrency", a->concurrency, "requests in flight at most (0: no limit)")
      ->check(at_least(0))
      ->capture_default_str();
  c->add_option("--seed", a->seed, "seed of the workload (lengths, prompts, arrivals)")->capture_default_str();
  c->add_option("--api-key", a->api_key, "sent as Authorization: Bearer KEY");
  c->add_option("--json", a->json_file, "also write the results as JSON here");
  c->add_option("--save-workload", a->save_workload,
                "also write the requests ([{prompt, max_tokens}]) as JSON here (bench/serve/hf_continuous_batching.py "
                "runs the same ones)");
  c->add_option("--timeout", a->timeout_s, "seconds a request may take")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  c->callback([a]() {
    int rc = run_bench_serve(*a);
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
