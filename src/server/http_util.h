// Small helpers shared by the server's handlers: JSON and error replies, the per-request log
// record, and detecting a client that went away.
#pragma once
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_request.h"

namespace lite_llama::server {

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& e);

// What the access log line reports for the request the current thread serves. cpp-httplib runs
// a request's routing, handler, content provider and logger on one worker thread, so a
// thread-local record follows one request from start to finish.
struct RequestTrace {
  std::chrono::steady_clock::time_point start;
  bool routed = false;  // start is this request's (set when routing begins)
  int64_t prompt_tokens = -1, completion_tokens = -1;
  bool client_gone = false;
};
RequestTrace& request_trace();

// cpp-httplib 0.11 does not expose the connection to handlers, and a write to a closed socket
// can succeed once before failing. The socket is found once by its address pair and polled:
// an orderly close or reset by the peer shows as readable with nothing to read.
class ClientConnection {
 public:
  explicit ClientConnection(const httplib::Request& req);
  // True once the peer has closed (or half-closed) the connection.
  bool closed() const;

 private:
  int fd_ = -1;
};

// Raises the backlog of the socket listening on local_port (listen() again on a listening
// socket only changes its backlog).
void raise_listen_backlog(int local_port, int backlog);

// Text for the log: control characters and bytes >= 0x7f as \xNN, so that a request cannot
// forge or break log lines.
std::string log_escape(std::string_view s);

// Shuts down (without closing) every accepted connection to local_port, so that cpp-httplib's
// workers waiting on idle keep-alive connections or half-sent requests return at once when
// the server stops, instead of after their timeouts.
void shutdown_connections(int local_port);

}  // namespace lite_llama::server
