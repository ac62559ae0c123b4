// Prometheus text exposition (format 0.0.4) of the server's counters, gauges and histograms.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "lite_llama/async_engine.h"

namespace lite_llama::server {

// What the HTTP layer counts itself: responses by status code.
struct HttpCounters {
  std::map<int, uint64_t> responses;  // status code -> count
};

std::string render_metrics(const ServerStats& s, const HttpCounters& http, const std::string& model);

}  // namespace lite_llama::server
