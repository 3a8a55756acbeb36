#include "serve/http/metrics.h"

#include <fmt/format.h>

namespace tunableop::serve::http {

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

std::string prometheus_histogram(const std::string& name, const std::string& help, const Histogram& h) {
  std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (i < h.counts.size()) cumulative += h.counts[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i], cumulative);
  }
  // +Inf holds every observation, whatever the buckets say.
  out += fmt::format("{0}_bucket{{le=\"+Inf\"}} {1}\n{0}_sum {2}\n{0}_count {1}\n", name, h.count, h.sum);
  return out;
}

std::string prometheus_text(const RuntimeStats& s, const ResponseCounts& responses) {
  std::string out;
  metric(out, "tunableop_ready", "gauge", "1 once the model is loaded and warmed up, 0 before and while draining",
         s.ready && !s.draining ? 1 : 0);
  metric(out, "tunableop_draining", "gauge", "1 while shutting down (no new requests admitted)", s.draining ? 1 : 0);
  metric(out, "tunableop_requests_running", "gauge", "Requests in the running batch", double(s.requests_running));
  metric(out, "tunableop_requests_waiting", "gauge", "Requests queued for admission", double(s.requests_waiting));
  metric(out, "tunableop_kv_pages_used", "gauge", "KV cache pages held by sequences", double(s.kv_pages_used));
  metric(out, "tunableop_kv_pages_total", "gauge", "KV cache pages in the pool", double(s.kv_pages_total));
  metric(out, "tunableop_kv_pages_peak", "gauge", "The most KV cache pages held at once since start",
         double(s.kv_pages_peak));
  metric(out, "tunableop_kv_page_size", "gauge", "Positions per KV cache page", double(s.kv_page_size));
  metric(out, "tunableop_prompt_tokens_total", "counter", "Prompt tokens prefilled", double(s.prompt_tokens));
  metric(out, "tunableop_generation_tokens_total", "counter", "Tokens generated", double(s.generation_tokens));
  metric(out, "tunableop_requests_finished_total", "counter", "Requests that ended (stop or length)",
         double(s.requests_finished));
  metric(out, "tunableop_requests_cancelled_total", "counter", "Requests cancelled (client gone, stop string, drain)",
         double(s.requests_cancelled));
  metric(out, "tunableop_requests_rejected_total", "counter", "Requests refused at submission (queue full, draining)",
         double(s.requests_rejected));
  metric(out, "tunableop_requests_failed_total", "counter", "Requests that failed in the runtime",
         double(s.requests_failed));
  metric(out, "tunableop_preemptions_total", "counter", "Sequences preempted (pages ran out) and recomputed later",
         double(s.preemptions));
  metric(out, "tunableop_steps_total", "counter", "Engine steps run", double(s.steps));
  metric(out, "tunableop_tuned_problems", "gauge", "GEMM/attention problems tuned off the request path",
         double(s.tuned_problems));
  metric(out, "tunableop_untuned_problems", "gauge", "Problems served by Default while waiting to be tuned",
         double(s.untuned_problems));
  out += prometheus_histogram("tunableop_time_to_first_token_seconds", "Arrival to first token", s.ttft);
  out +=
      prometheus_histogram("tunableop_time_per_output_token_seconds", "Time per output token after the first", s.tpot);
  out += prometheus_histogram("tunableop_e2e_request_latency_seconds", "Arrival to last token", s.e2e);
  out +=
      prometheus_histogram("tunableop_decode_step_seconds",
                           "One decode step's engine call (sampling and the tokens' download included)", s.decode_step);
  out += prometheus_histogram("tunableop_prefill_step_seconds", "One prefill pass's engine call", s.prefill_step);
  out += prometheus_histogram("tunableop_host_turn_seconds",
                              "The loop's own time between two engine calls while busy (admission, planning, tokens "
                              "handed to the requests)",
                              s.host_turn);
  metric(out, "tunableop_decode_rows_total", "counter", "Sequences decoded, summed over decode steps",
         double(s.decode_rows));
  metric(out, "tunableop_decode_padded_rows_total", "counter",
         "Rows the decode steps ran at (their batch sizes, padded to the engine's buckets)",
         double(s.decode_padded_rows));
  out +=
      "# HELP tunableop_http_responses_total HTTP responses sent, by status code\n"
      "# TYPE tunableop_http_responses_total counter\n";
  for (const auto& [code, n] : responses)
    out += fmt::format("tunableop_http_responses_total{{code=\"{}\"}} {}\n", code, n);
  return out;
}

}  // namespace tunableop::serve::http
