#include "bench_serve_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

namespace tunableop::cli::bench_serve {

namespace {

// [0, 1) from the top 53 bits.
double uniform(std::mt19937_64& g) { return double(g() >> 11) * 0x1.0p-53; }

// Box-Muller; one of the pair is enough here.
double normal(std::mt19937_64& g) {
  const double u1 = 1.0 - uniform(g);  // (0, 1]
  const double u2 = uniform(g);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t lognormal_length(std::mt19937_64& g, double mu, double sigma, int64_t lo, int64_t hi) {
  const double x = std::exp(mu + sigma * normal(g));
  return std::clamp<int64_t>(int64_t(std::llround(std::min(x, 1e15))), lo, hi);
}

}  // namespace

Workload make_workload(const WorkloadOptions& o) {
  Workload w;
  std::mt19937_64 lengths(o.seed), ids(o.seed ^ 0x5eed5eed5eed5eedull), arrivals(o.seed ^ 0xa771a1ull);
  double t = 0;
  for (int64_t i = 0; i < o.requests; ++i) {
    WorkItem item;
    int64_t p = lognormal_length(lengths, o.prompt_mu, o.prompt_sigma, o.min_len, o.max_len);
    int64_t n = lognormal_length(lengths, o.output_mu, o.output_sigma, o.min_len, o.max_len);
    if (o.max_context > 0) {
      p = std::min(p, o.max_context - 1);
      if (p + n > o.max_context) {
        n = o.max_context - p;
        ++w.cut_to_context;
      }
    }
    item.prompt.resize(size_t(p));
    for (auto& id : item.prompt) id = int32_t(ids() % uint64_t(std::max<int64_t>(o.vocab_size, 1)));
    item.max_tokens = n;
    if (o.rate > 0 && std::isfinite(o.rate)) t += -std::log(1.0 - uniform(arrivals)) / o.rate;
    item.arrival_s = t;
    w.items.push_back(std::move(item));
  }
  return w;
}

void SseParser::feed(std::string_view bytes) {
  buffer_.append(bytes);
  size_t start = 0;
  for (;;) {
    const size_t end = buffer_.find("\n\n", start);
    if (end == std::string::npos) break;
    std::string_view event(buffer_.data() + start, end - start);
    // An event's data lines, joined by "\n" (we send one per event).
    std::string data;
    size_t pos = 0;
    while (pos <= event.size()) {
      size_t nl = event.find('\n', pos);
      if (nl == std::string_view::npos) nl = event.size();
      std::string_view line = event.substr(pos, nl - pos);
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (!data.empty()) data += '\n';
        data.append(line);
      }
      pos = nl + 1;
    }
    if (!data.empty()) on_data_(data);
    start = end + 2;
  }
  buffer_.erase(0, start);
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = int64_t(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  auto at = [&](double q) {
    const double pos = q * double(v.size() - 1);
    const size_t i = size_t(pos);
    const double f = pos - double(i);
    return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
  };
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  return p;
}

Summary summarize(const std::vector<RequestResult>& results, double duration_s) {
  Summary s;
  s.requests = int64_t(results.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const auto& r : results) {
    if (!r.ok) {
      ++s.errors[r.error.empty() ? "unknown" : r.error];
      continue;
    }
    ++s.completed;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    ttft.push_back(r.ttft * 1e3);
    e2e.push_back(r.e2e * 1e3);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) * 1e3 / double(r.output_tokens - 1));
    for (double x : r.itl) itl.push_back(x * 1e3);
  }
  if (duration_s > 0) {
    s.requests_per_s = double(s.completed) / duration_s;
    s.output_tokens_per_s = double(s.output_tokens) / duration_s;
    s.total_tokens_per_s = double(s.prompt_tokens + s.output_tokens) / duration_s;
  }
  s.ttft_ms = percentiles(std::move(ttft));
  s.tpot_ms = percentiles(std::move(tpot));
  s.itl_ms = percentiles(std::move(itl));
  s.e2e_ms = percentiles(std::move(e2e));
  return s;
}

std::string format_table(const Summary& s) {
  std::string out;
  out += fmt::format("Requests: {} completed of {} in {:.2f} s", s.completed, s.requests, s.duration_s);
  if (!s.errors.empty()) {
    out += "; errors:";
    for (const auto& [kind, n] : s.errors) out += fmt::format(" {} {}", kind, n);
  }
  out += "\n";
  out += fmt::format("Throughput: {:.2f} requests/s, {:.1f} output tokens/s, {:.1f} total tokens/s\n", s.requests_per_s,
                     s.output_tokens_per_s, s.total_tokens_per_s);
  out += fmt::format("Tokens: {} prompt, {} output\n", s.prompt_tokens, s.output_tokens);
  out += fmt::format("{:<14}{:>10}{:>10}{:>10}{:>10}\n", "latency (ms)", "mean", "p50", "p90", "p99");
  auto row = [&](const char* name, const Percentiles& p) {
    out += fmt::format("{:<14}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}\n", name, p.mean, p.p50, p.p90, p.p99);
  };
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("ITL", s.itl_ms);
  row("E2E", s.e2e_ms);
  return out;
}

std::string summary_json(const Summary& s, const std::string& config_json) {
  auto pj = [](const Percentiles& p) {
    return nlohmann::json{{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"n", p.n}};
  };
  nlohmann::json j = nlohmann::json::parse(config_json.empty() ? "{}" : config_json);
  j["requests"] = s.requests;
  j["completed"] = s.completed;
  j["errors"] = s.errors;
  j["duration_s"] = s.duration_s;
  j["prompt_tokens"] = s.prompt_tokens;
  j["output_tokens"] = s.output_tokens;
  j["requests_per_s"] = s.requests_per_s;
  j["output_tokens_per_s"] = s.output_tokens_per_s;
  j["total_tokens_per_s"] = s.total_tokens_per_s;
  j["ttft_ms"] = pj(s.ttft_ms);
  j["tpot_ms"] = pj(s.tpot_ms);
  j["itl_ms"] = pj(s.itl_ms);
  j["e2e_ms"] = pj(s.e2e_ms);
  return j.dump(2);
}

}  // namespace tunableop::cli::bench_serve
