#include "server/metrics.h"

#include <fmt/format.h>

namespace lite_llama::server {
namespace {

// Prometheus label values escape backslash, quote and newline.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

struct Writer {
  std::string out;
  std::string model;
  void head(const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    out += fmt::format("{}{{model=\"{}\"{}{}}} {}\n", name, model, labels.empty() ? "" : ",", labels, v);
  }
  void metric(const char* name, const char* type, const char* help, double v) {
    head(name, type, help);
    sample(name, "", v);
  }
  void histogram(const char* name, const char* help, const LatencyHistogram& h) {
    head(name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cum += h.counts[i];
      sample(std::string(name) + "_bucket", fmt::format("le=\"{}\"", h.bounds[i]), double(cum));
    }
    cum += h.counts.back();
    sample(std::string(name) + "_bucket", "le=\"+Inf\"", double(cum));
    sample(std::string(name) + "_sum", "", h.sum);
    sample(std::string(name) + "_count", "", double(h.count));
  }
};

}  // namespace

std::string render_metrics(const ServerStats& s, const HttpCounters& http, const std::string& model) {
  Writer w;
  w.model = label(model);
  w.head("lite_llama_requests_total", "counter", "Generation requests by outcome.");
  w.sample("lite_llama_requests_total", "status=\"ok\"", double(s.requests_ok));
  w.sample("lite_llama_requests_total", "status=\"cancelled\"", double(s.requests_cancelled));
  w.sample("lite_llama_requests_total", "status=\"error\"", double(s.requests_error));
  w.sample("lite_llama_requests_total", "status=\"rejected\"", double(s.requests_rejected));
  w.head("lite_llama_http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http.responses)
    w.sample("lite_llama_http_responses_total", fmt::format("code=\"{}\"", code), double(n));
  w.metric("lite_llama_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           double(s.prompt_tokens));
  w.metric("lite_llama_generation_tokens_total", "counter", "Generated tokens.",
           double(s.generated_tokens));
  w.metric("lite_llama_requests_running", "gauge", "Requests in the running batch.",
           double(s.engine.running));
  w.metric("lite_llama_requests_waiting", "gauge", "Requests queued or waiting for admission.",
           double(s.engine.waiting + s.queued));
  w.metric("lite_llama_kv_slots_used", "gauge", "KV cache token slots in use.",
           double(s.engine.kv_slots_used));
  w.metric("lite_llama_kv_slots_total", "gauge", "KV cache token slots in all.",
           double(s.engine.kv_slots_total));
  w.metric("lite_llama_kv_cache_usage_ratio", "gauge", "Fraction of KV slots in use.",
           s.engine.kv_slots_total ? double(s.engine.kv_slots_used) / double(s.engine.kv_slots_total) : 0.0);
  w.metric("lite_llama_preemptions_total", "counter", "Requests preempted for KV space.",
           double(s.engine.preemptions));
  w.metric("lite_llama_prefix_cache_tokens", "gauge", "KV slots the prefix cache holds.",
           double(s.engine.prefix_cached_tokens));
  w.metric("lite_llama_prefix_cache_queried_tokens_total", "counter",
           "Prompt tokens looked up in the prefix cache.", double(s.engine.prefix_query_tokens));
  w.metric("lite_llama_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens found in the prefix cache (not computed again).", double(s.engine.prefix_hit_tokens));
  w.metric("lite_llama_prefix_cache_hit_ratio", "gauge", "Prefix-cache hit tokens / queried tokens.",
           s.engine.prefix_query_tokens ? double(s.engine.prefix_hit_tokens) / double(s.engine.prefix_query_tokens)
                                        : 0.0);
  w.histogram("lite_llama_time_to_first_token_seconds", "Time from submission to the first token.",
              s.ttft);
  w.histogram("lite_llama_inter_token_latency_seconds", "Time between consecutive tokens of a request.",
              s.itl);
  return w.out;
}

}  // namespace lite_llama::server
