#include "server/server.h"

#include <httplib.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "lite_llama/async_engine.h"
#include "server/chat_page.h"
#include "server/completion_handler.h"
#include "server/http_util.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace lite_llama::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr int kListenBacklog = 1024;

// Which methods each known path takes: a known path with another method is 405, not 404.
const char* allowed_methods(const std::string& path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  if (path == "/" || path == "/health" || path == "/metrics" || path == "/v1/models" ||
      path.rfind("/v1/models/", 0) == 0)
    return "GET";
  return nullptr;
}

// Compares without an early exit, so the time taken does not reveal how much of a key matched.
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
  return diff == 0;
}

class HttpServer {
 public:
  HttpServer(std::unique_ptr<Engine> engine, const ServerOptions& opts)
      : opts_(opts), async_(std::move(engine), AsyncEngine::Options{opts.max_waiting}),
        ctx_{async_, limits(async_.engine().info(), opts), PromptPolicy{opts.allow_special_in_content},
             {}, {}} {
    created_ = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  }

  int run() {
    const int threads = opts_.http_threads;
    svr_.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    svr_.set_payload_max_length(size_t(opts_.max_body_bytes));
    svr_.set_read_timeout(int(opts_.read_timeout_s));
    svr_.set_write_timeout(30);
    svr_.set_tcp_nodelay(true);  // each SSE event goes out at once
    // cpp-httplib's default adds SO_REUSEPORT, with which a second server binds the same port
    // and the kernel splits the connections between the two. SO_REUSEADDR alone still allows a
    // restart while old connections sit in TIME_WAIT.
    svr_.set_socket_options([](socket_t s) {
      int yes = 1;
      setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    routes();
    int port = opts_.port;
    if (port == 0)
      port = svr_.bind_to_any_port(opts_.host);
    else if (!svr_.bind_to_port(opts_.host, port))
      port = -1;
    LL_CHECK(port > 0, "cannot listen on {}:{}: address in use or not available", opts_.host,
             opts_.port);
    port_ = port;
    // Debian's cpp-httplib is compiled with a listen backlog of 5: a burst of connections gets
    // resets. listen() again on the bound socket raises it.
    raise_listen_backlog(port, kListenBacklog);
    const ModelInfo& info = async_.engine().info();
    std::fprintf(stderr,
                 "lite-llama serve: model '%s' (%s, ctx %lld, %lld sequences, %lld KV slots) on "
                 "http://%s:%d%s\n",
                 ctx_.limits.model_name.c_str(), info.backend.c_str(), (long long)info.ctx,
                 (long long)info.max_num_seqs, (long long)info.kv_slots, opts_.host.c_str(), port,
                 opts_.api_key.empty() ? "" : " (API key required)");
    std::fflush(stderr);
    std::thread signals([&] { watch_signals(); });
    svr_.listen_after_bind();
    listening_done_ = true;
    signals.join();
    async_.shutdown(std::chrono::milliseconds(0));
    std::fprintf(stderr, "lite-llama serve: stopped\n");
    return 0;
  }

 private:
  static RequestLimits limits(const ModelInfo& info, const ServerOptions& o) {
    RequestLimits l;
    l.ctx = info.ctx;
    l.vocab_size = info.vocab_size;
    l.model_name = o.served_model_name.empty() ? default_model_name(info.path) : o.served_model_name;
    l.max_n = o.max_n;
    return l;
  }

  // SIGINT/SIGTERM arrive here only (block_shutdown_signals). A timed wait lets the thread end
  // when the server stops for another reason.
  void watch_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    const timespec tick{0, 100 * 1000 * 1000};
    while (!listening_done_) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig != SIGINT && sig != SIGTERM) continue;
      std::fprintf(stderr, "lite-llama serve: %s: no new requests; running ones get %.0f s to finish\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", opts_.shutdown_grace_s);
      std::fflush(stderr);
      ctx_.shutting_down = true;
      async_.shutdown(std::chrono::milliseconds(int64_t(opts_.shutdown_grace_s * 1000)));
      // Every request has its final output now; let the handlers write it before the sockets go.
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (ctx_.active > 0 && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      svr_.stop();
      shutdown_connections(port_);
      // stop() joins the HTTP workers; should one still be blocked on a socket, exit without it
      // after a few seconds (the engine has stopped).
      const auto hard = Clock::now() + std::chrono::seconds(5);
      while (!listening_done_ && Clock::now() < hard)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!listening_done_) {
        std::fprintf(stderr, "lite-llama serve: stopped (an HTTP worker did not return)\n");
        std::fflush(stderr);
        std::_Exit(0);
      }
      return;
    }
  }

  void routes() {
    svr_.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      RequestTrace& t = request_trace();
      t = RequestTrace{};
      t.start = Clock::now();
      t.routed = true;
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // The key is checked in the handlers, after cpp-httplib has read the body: a reply sent
    // before it (from the pre-routing handler) leaves the body on a kept-alive connection,
    // where it is read as the next request.
    auto v1 = [this](httplib::Server::Handler h) {
      return [this, h](const httplib::Request& req, httplib::Response& res) {
        if (opts_.api_key.empty() || authorized(req)) return h(req, res);
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, ApiError(401, "Incorrect or missing API key; send 'Authorization: Bearer KEY'.",
                                 "", "invalid_api_key"));
      };
    };
    svr_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(chat_page(), "text/html; charset=utf-8");
    });
    svr_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool ok = !ctx_.shutting_down && async_.accepting();
      send_json(res, ok ? 200 : 503, {{"status", ok ? "ok" : "shutting_down"}});
    });
    svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      HttpCounters http;
      {
        std::lock_guard<std::mutex> lock(mu_);
        http = http_;
      }
      res.set_content(render_metrics(async_.stats(), http, ctx_.limits.model_name),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    svr_.Get("/v1/models", v1([this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"object", "list"}, {"data", json::array({model_json()})}});
    }));
    svr_.Get(R"(/v1/models/(.+))", v1([this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (id == ctx_.limits.model_name)
        send_json(res, 200, model_json());
      else
        send_error(res, ApiError(404, "The model '" + id + "' does not exist.", "model", "model_not_found"));
    }));
    svr_.Post("/v1/completions", v1([this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(ctx_, req, res, Endpoint::Completions);
    }));
    svr_.Post("/v1/chat/completions", v1([this](const httplib::Request& req, httplib::Response& res) {
      handle_generation(ctx_, req, res, Endpoint::Chat);
    }));
    // Called for every response of status >= 400; fills in those nobody wrote a body for.
    svr_.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const char* allow = res.status == 404 ? allowed_methods(req.path) : nullptr;
      if (allow) {
        res.set_header("Allow", allow);
        send_error(res, ApiError(405, "method " + req.method + " is not allowed on " + req.path, "",
                                 "method_not_allowed"));
      } else if (res.status == 404) {
        send_error(res, ApiError(404, "no route for " + req.method + " " + req.path, "", "not_found"));
      } else {
        send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status)));
      }
      return httplib::Server::HandlerResponse::Handled;
    }));
    svr_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string msg = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        msg = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, msg, "", "", "server_error"));
    });
    svr_.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log(req, res); });
  }

  bool authorized(const httplib::Request& req) const {
    const std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.size() < prefix.size() || h.compare(0, prefix.size(), prefix) != 0) return false;
    return same_key(h.substr(prefix.size()), opts_.api_key);
  }

  json model_json() const {
    return {{"id", ctx_.limits.model_name},
            {"object", "model"},
            {"created", created_},
            {"owned_by", "lite-llama"},
            {"max_model_len", ctx_.limits.ctx}};
  }

  // One line per request: method, path, status, tokens, duration.
  // A request cpp-httplib refused before routing (malformed, too large) has no start time of
  // its own: its duration is logged as "-".
  void log(const httplib::Request& req, const httplib::Response& res) {
    RequestTrace& t = request_trace();
    std::string dur = "-";
    if (t.routed) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f ms",
                    std::chrono::duration<double, std::milli>(Clock::now() - t.start).count());
      dur = buf;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++http_.responses[res.status];
    }
    std::string tokens;
    if (t.prompt_tokens >= 0) tokens += " prompt=" + std::to_string(t.prompt_tokens);
    if (t.completion_tokens >= 0) tokens += " completion=" + std::to_string(t.completion_tokens);
    std::fprintf(stderr, "%s %s %d%s %s%s\n", log_escape(req.method).c_str(),
                 log_escape(req.path).c_str(), res.status, tokens.c_str(), dur.c_str(),
                 t.client_gone ? " (client disconnected: cancelled)" : "");
    std::fflush(stderr);
    t = RequestTrace{};
  }

  ServerOptions opts_;
  AsyncEngine async_;
  ServingContext ctx_;
  httplib::Server svr_;
  int64_t created_ = 0;
  std::atomic<bool> listening_done_{false};
  int port_ = 0;
  std::mutex mu_;
  HttpCounters http_;
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
