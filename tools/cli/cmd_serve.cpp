// `lite-llama serve`: the OpenAI-compatible HTTP server (src/server) over one model.
#include <cstdlib>

#include "common.h"
#include "core/log.h"
#include "server/server.h"

namespace lite_llama::cli {
namespace {

struct ServeArgs {
  ModelArgs model;
  server::ServerOptions server;
};

void run_serve(ServeArgs& a) {
  // Before any thread exists (the engine starts its workers while loading).
  server::block_shutdown_signals();
  // A server says what it loaded (info level) unless --quiet; the request log goes to stderr.
  set_log_level(a.model.quiet ? LogLevel::Error : a.model.verbose ? LogLevel::Debug : LogLevel::Info);
  auto engine = Engine::create(resolve_engine_options(a.model));
  const int rc = server::run_server(std::move(engine), a.server);
  if (rc != 0) std::exit(rc);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, SSE)");
  add_model_options(c, a->model);
  add_chat_template_option(c, a->model);
  server::ServerOptions& s = a->server;
  c->add_option("--host", s.host, "address to listen on")->capture_default_str();
  c->add_option("--port", s.port, "port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  c->add_option("--served-model-name", s.served_model_name,
                "model id in the API (default: the model file or directory name)");
  c->add_option("--max-waiting", s.max_waiting, "requests waiting for a slot before 429")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  c->add_option("--allowed-origins", s.allowed_origins,
                "browser origins whose pages may call the server (CORS): '*', a comma-separated list, or '' for none")
      ->capture_default_str();
  c->add_option("--http-threads", s.http_threads,
                "HTTP event-loop threads (open connections hold none)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c->add_option("--max-connections", s.max_connections, "open connections in all (more get 503)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  c->add_option("--max-connections-per-client", s.max_connections_per_client,
                "open connections per client address (more get 429)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  c->add_option("--idle-timeout", s.idle_timeout_s,
                "seconds a kept-alive connection may wait for its next request")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  c->add_option("--shutdown-grace", s.shutdown_grace_s,
                "seconds running requests may finish after SIGTERM/SIGINT")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  c->add_option("--max-body-bytes", s.max_body_bytes, "request bodies above this get 413")
      ->check(CLI::Range(int64_t(1024), int64_t(1) << 32))
      ->capture_default_str();
  c->add_option("--read-timeout", s.read_timeout_s,
                "seconds a client may take to send a request header, and its body (408)")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  c->add_flag("--allow-special-in-content", s.allow_special_in_content,
              "chat: special-token strings inside messages act as control tokens (default: text)");
  c->add_flag("--log-timing", s.log_timing,
              "log where each generation request's time to its first token went (microseconds per stage)");
  c->add_option("--max-n", s.max_n, "choices per request ('n') at most")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  c->callback([a] { run_serve(*a); });
}

}  // namespace lite_llama::cli
