// What the event-driven HTTP layer (http_session, http_listener) and the routes (server.cpp)
// exchange: a parsed request, a reply (a body, or a running Generation that produces it), and
// the interface the routes implement.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/generation.h"

namespace lite_llama::server {

struct HttpRequest {
  std::string method, target;
  std::string path;  // target without the query, percent-decoded
  std::string authorization;
  bool expect_continue = false;
  std::string body;
  std::string remote;  // the peer's address
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::unique_ptr<Generation> gen;  // set: the body comes from it (SSE or JSON at the end)
};

// One access-log record.
struct HttpLogEntry {
  std::string method = "-", path = "-";
  int status = 0;
  int64_t prompt_tokens = -1, completion_tokens = -1;
  double ms = 0;
  bool client_gone = false;
  std::string timing;  // HttpConfig::log_timing: where the time to the first token went
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // After the header, before any body byte is read: a reply here (401, 404, 405) is sent at once
  // and the body is never read.
  virtual std::optional<HttpReply> before_body(const HttpRequest& head) = 0;
  // Whether handle() may take long (JSON parsing, tokenizing): it then runs on a worker thread.
  virtual bool heavy(const HttpRequest& head) const = 0;
  virtual HttpReply handle(const HttpRequest& req) = 0;
  virtual void log(const HttpLogEntry& e) = 0;
};

// Limits of the HTTP layer.
struct HttpConfig {
  int io_threads = 2;              // event loops
  int worker_threads = 4;          // heavy handlers (tokenizing)
  int max_connections = 4096;      // in all; more get 503
  int max_connections_per_client = 512;  // per peer address; more get 429
  size_t max_header_bytes = 16 << 10;    // 431 past this
  uint64_t max_body_bytes = uint64_t(32) << 20;  // 413 past this
  std::chrono::milliseconds read_timeout{10000};   // header, and body, each from its first byte: 408
  std::chrono::milliseconds idle_timeout{30000};   // a kept-alive connection waiting for a request
  std::chrono::milliseconds write_timeout{30000};  // a client that stops reading its response
  bool log_timing = false;  // generation requests' log lines get their stages' times
  // Origins whose pages may call the server from a browser (CORS): "*" any, a comma-separated
  // list of exact origins, or "" none (no CORS headers).
  std::string allowed_origins = "*";
};

// Response helpers shared by the routes and the HTTP layer.
std::string reason_phrase(int status);
HttpReply json_reply(int status, const std::string& body);
HttpReply error_reply(const ApiError& e);
// Text for the log: control characters, backslash and bytes >= 0x7f as \xNN, so that a request
// cannot forge or break log lines.
std::string log_escape(std::string_view s);
// %XX decoded ('+' stays).
std::string percent_decode(std::string_view s);

}  // namespace lite_llama::server
