// GET /metrics: the runtime's statistics (RuntimeStats) and the HTTP layer's response counts in
// Prometheus' text exposition format (version 0.0.4): gauges for what is in flight now,
// counters (`_total`) for what happened since start, cumulative histograms for latencies.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "serve/request.h"

namespace tunableop::serve::http {

// HTTP responses sent, by status code.
using ResponseCounts = std::map<int, uint64_t>;

std::string prometheus_text(const RuntimeStats& s, const ResponseCounts& responses);

// A histogram as Prometheus lines: NAME_bucket{le="..."} (cumulative, +Inf last), NAME_sum,
// NAME_count.
std::string prometheus_histogram(const std::string& name, const std::string& help, const Histogram& h);

}  // namespace tunableop::serve::http
