#include "server/server.h"

#include <cctype>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "lite_llama/async_engine.h"
#include "server/chat_page.h"
#include "server/generation.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace lite_llama::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Which methods each known path takes (its Allow header): a known path with another method is
// 405, not 404. HEAD goes wherever GET goes; the session sends its header without the body.
const char* allowed_methods(const std::string& path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  if (path == "/" || path == "/health" || path == "/metrics" || path == "/v1/models" ||
      path.rfind("/v1/models/", 0) == 0)
    return "GET, HEAD";
  return nullptr;
}

// Whether `method` is one of the comma-separated methods in `allow`.
bool allows(std::string_view allow, std::string_view method) {
  for (size_t at = 0; at <= allow.size();) {
    const size_t end = std::min(allow.find(", ", at), allow.size());
    if (allow.substr(at, end - at) == method) return true;
    at = end + 2;
  }
  return false;
}

// Compares without an early exit, so the time taken does not reveal how much of a key matched.
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
  return diff == 0;
}

HttpConfig http_config(const ServerOptions& o) {
  HttpConfig c;
  c.io_threads = o.http_threads;
  c.max_connections = o.max_connections;
  c.max_connections_per_client = o.max_connections_per_client;
  c.max_body_bytes = uint64_t(o.max_body_bytes);
  c.read_timeout = std::chrono::milliseconds(int64_t(o.read_timeout_s * 1000));
  c.idle_timeout = std::chrono::milliseconds(int64_t(o.idle_timeout_s * 1000));
  c.log_timing = o.log_timing;
  c.allowed_origins = o.allowed_origins;
  return c;
}

class HttpServer final : public HttpHandler {
 public:
  HttpServer(std::unique_ptr<Engine> engine, const ServerOptions& opts)
      : opts_(opts), async_(std::move(engine), AsyncEngine::Options{opts.max_waiting}),
        ctx_{async_, limits(async_.engine().info(), opts), PromptPolicy{opts.allow_special_in_content},
             {}, {}},
        listener_(*this, http_config(opts)) {
    created_ = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  }

  int run() {
    const int port = listener_.bind(opts_.host, opts_.port);
    const ModelInfo& info = async_.engine().info();
    std::fprintf(stderr,
                 "lite-llama serve: model '%s' (%s, ctx %lld, %lld sequences, %lld KV slots) on "
                 "http://%s:%d%s\n",
                 ctx_.limits.model_name.c_str(), info.backend.c_str(), (long long)info.ctx,
                 (long long)info.max_num_seqs, (long long)info.kv_slots, opts_.host.c_str(), port,
                 opts_.api_key.empty() ? "" : " (API key required)");
    std::fflush(stderr);
    listener_.start();
    wait_for_signal();
    listener_.stop();
    async_.shutdown(std::chrono::milliseconds(0));
    std::fprintf(stderr, "lite-llama serve: stopped\n");
    return 0;
  }

  std::optional<HttpReply> before_body(const HttpRequest& req) override {
    const char* allow = allowed_methods(req.path);
    if (!allow) return error_reply(ApiError(404, "no route for " + req.method + " " + req.path, "", "not_found"));
    if (!allows(allow, req.method)) {
      HttpReply r = error_reply(ApiError(405, "method " + req.method + " is not allowed on " + req.path, "",
                                         "method_not_allowed"));
      r.headers.emplace_back("Allow", allow);
      return r;
    }
    // The key is checked before the body is read: an unauthenticated client gets no further.
    if (req.path.rfind("/v1/", 0) == 0 && !opts_.api_key.empty() && !authorized(req)) {
      HttpReply r = error_reply(ApiError(401, "Incorrect or missing API key; send 'Authorization: Bearer KEY'.",
                                         "", "invalid_api_key"));
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    return std::nullopt;
  }

  bool heavy(const HttpRequest& req) const override { return req.method == "POST"; }

  HttpReply handle(const HttpRequest& req) override {
    try {
      return route(req);
    } catch (const ApiError& e) {
      return error_reply(e);
    } catch (const std::bad_alloc&) {
      return error_reply(ApiError(500, "out of memory", "", "", "server_error"));
    } catch (const std::exception& e) {
      return error_reply(ApiError(500, e.what(), "", "", "server_error"));
    }
  }

  // One line per request: method, path, status, tokens, duration.
  void log(const HttpLogEntry& e) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++http_.responses[e.status];
    }
    std::string tokens;
    if (e.prompt_tokens >= 0) tokens += " prompt=" + std::to_string(e.prompt_tokens);
    if (e.completion_tokens >= 0) tokens += " completion=" + std::to_string(e.completion_tokens);
    std::fprintf(stderr, "%s %s %d%s %.1f ms%s%s%s\n", log_escape(e.method).c_str(), log_escape(e.path).c_str(),
                 e.status, tokens.c_str(), e.ms, e.client_gone ? " (client disconnected: cancelled)" : "",
                 e.timing.empty() ? "" : " ", e.timing.c_str());
    std::fflush(stderr);
  }

 private:
  static RequestLimits limits(const ModelInfo& info, const ServerOptions& o) {
    RequestLimits l;
    l.ctx = info.ctx;
    l.vocab_size = info.vocab_size;
    l.model_name = o.served_model_name.empty() ? default_model_name(info.path) : o.served_model_name;
    // n choices wait as n requests: more than --max-waiting could never be queued, and a 429 would
    // send the client to retry for ever.
    l.max_n = std::min(o.max_n, o.max_waiting);
    l.max_choices = o.max_waiting;  // a batch of prompts likewise
    return l;
  }

  HttpReply route(const HttpRequest& req) {
    const std::string& p = req.path;
    if (p == "/v1/completions" || p == "/v1/chat/completions") {
      HttpReply r;
      r.gen = start_generation(ctx_, req.body, p == "/v1/completions" ? Endpoint::Completions : Endpoint::Chat);
      return r;
    }
    if (p == "/") {
      HttpReply r = json_reply(200, chat_page());
      r.content_type = "text/html; charset=utf-8";
      return r;
    }
    if (p == "/health") {
      const bool ok = !ctx_.shutting_down && async_.accepting();
      return json_reply(ok ? 200 : 503, dump(json{{"status", ok ? "ok" : "shutting_down"}}));
    }
    if (p == "/metrics") {
      HttpCounters http;
      {
        std::lock_guard<std::mutex> lock(mu_);
        http = http_;
      }
      HttpReply r = json_reply(200, render_metrics(async_.stats(), http, ctx_.limits.model_name));
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return r;
    }
    if (p == "/v1/models") return json_reply(200, dump(json{{"object", "list"}, {"data", json::array({model_json()})}}));
    const std::string id = p.substr(std::string("/v1/models/").size());
    if (id == ctx_.limits.model_name) return json_reply(200, dump(model_json()));
    return error_reply(ApiError(404, "The model '" + id + "' does not exist.", "model", "model_not_found"));
  }

  // SIGINT/SIGTERM arrive here only (block_shutdown_signals).
  void wait_for_signal() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    while (sig != SIGINT && sig != SIGTERM) sigwait(&set, &sig);
    std::fprintf(stderr, "lite-llama serve: %s: no new requests; running ones get %.0f s to finish\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", opts_.shutdown_grace_s);
    std::fflush(stderr);
    ctx_.shutting_down = true;  // new requests get 503 (health too) while running ones finish
    async_.shutdown(std::chrono::milliseconds(int64_t(opts_.shutdown_grace_s * 1000)));
    // Every request has its final output now; let the sessions write it before they close.
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (ctx_.active > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  bool authorized(const HttpRequest& req) const {
    const std::string& h = req.authorization;
    // The scheme is case-insensitive (RFC 7235): "bearer KEY" is as good as "Bearer KEY".
    // One or more spaces may follow it.
    constexpr std::string_view scheme = "bearer";
    if (h.size() <= scheme.size() || h[scheme.size()] != ' ') return false;
    for (size_t i = 0; i < scheme.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(h[i])) != scheme[i]) return false;
    const size_t key = h.find_first_not_of(' ', scheme.size());
    return key != std::string::npos && same_key(h.substr(key), opts_.api_key);
  }

  json model_json() const {
    return {{"id", ctx_.limits.model_name},
            {"object", "model"},
            {"created", created_},
            {"owned_by", "lite-llama"},
            {"max_model_len", ctx_.limits.ctx}};
  }

  ServerOptions opts_;
  AsyncEngine async_;
  ServingContext ctx_;
  int64_t created_ = 0;
  std::mutex mu_;
  HttpCounters http_;
  HttpListener listener_;  // last: destroyed first, while the engine and ctx_ still exist
};

}  // namespace

void block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A client that vanishes must not kill the server through a write to its socket.
  signal(SIGPIPE, SIG_IGN);
}

std::string default_model_name(const std::string& model_path) {
  std::string p = model_path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash != std::string::npos) p = p.substr(slash + 1);
  for (const std::string ext : {".gguf", ".json"})
    if (p.size() > ext.size() && p.compare(p.size() - ext.size(), ext.size(), ext) == 0)
      p.resize(p.size() - ext.size());
  return p.empty() ? "lite-llama" : p;
}

int run_server(std::unique_ptr<Engine> engine, const ServerOptions& opts) {
  HttpServer server(std::move(engine), opts);
  return server.run();
}

}  // namespace lite_llama::server
