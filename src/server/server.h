// The OpenAI-compatible HTTP server: routes, API-key check, access log, metrics, and the
// lifecycle over the event-driven HTTP layer (http_listener, http_session) (SIGINT/SIGTERM: stop accepting, drain for a grace period, cancel the rest, exit).
#pragma once
#include <memory>
#include <string>

#include "lite_llama/engine.h"

namespace lite_llama::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0 = any free port (printed at start)
  std::string api_key;             // empty = no authentication
  std::string served_model_name;   // empty = the model file or directory base name
  int http_threads = 2;            // event-loop threads; connections hold none of them
  int max_connections = 4096;      // open connections in all (more: 503)
  int max_connections_per_client = 512;  // per client address (more: 429)
  double shutdown_grace_s = 10;    // how long running requests may finish after SIGTERM
  int max_waiting = 512;           // queued requests before 429
  int max_n = 16;                  // choices per request
  int64_t max_body_bytes = int64_t(32) << 20;  // larger request bodies get 413
  // Chat: special-token strings inside message contents act as control tokens (the old
  // behaviour; lets a client forge turns). Off: they are tokenized as text.
  bool allow_special_in_content = false;
  double read_timeout_s = 10;      // header, and body, each within this of its first byte (408)
  double idle_timeout_s = 30;      // a kept-alive connection without a request is closed
  bool log_timing = false;         // generation log lines say where the time to the first token went
  std::string allowed_origins = "*";  // browser origins that may call (CORS): "*", a list, "" none
};

// Blocks SIGINT and SIGTERM in the calling thread and in every thread started after it, so
// that only run_server's signal thread takes them. Call before creating the engine (whose
// worker threads would otherwise receive the signal and kill the process).
void block_shutdown_signals();

// The model name a server reports by default: the model path's base name without .gguf or .json.
std::string default_model_name(const std::string& model_path);

// Serves until SIGINT or SIGTERM; returns the process exit code. Throws lite_llama::Error when
// it cannot listen.
int run_server(std::unique_ptr<Engine> engine, const ServerOptions& opts);

}  // namespace lite_llama::server
