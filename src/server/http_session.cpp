#include "server/http_session.h"

#include <fmt/format.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cctype>

#include "server/openai_response.h"

namespace lite_llama::server {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

// length: the body's size; none for a stream, chunked (an HTTP/1.0 client's stream is ended by
// closing the connection instead).
std::string response_head(int status, const HttpReply& r, bool keep_alive, bool chunked,
                          std::optional<size_t> length) {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", status, reason_phrase(status),
                              r.content_type);
  for (const auto& [k, v] : r.headers) h += k + ": " + v + "\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  if (length) h += fmt::format("Content-Length: {}\r\n", *length);
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

// A response with its whole body; to HEAD the header alone, whose Content-Length still states
// the body a GET would get (RFC 9110 9.3.2): a keep-alive client must not find body bytes.
std::string whole_response(const HttpReply& r, const std::string& body, bool keep_alive, bool head_only) {
  std::string out = response_head(r.status, r, keep_alive, false, body.size());
  if (!head_only) out += body;
  return out;
}

std::string chunk(std::string_view data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

// Beast says "bad Content-Length" for a negative or non-numeric value, for two of them, beside
// Transfer-Encoding, and for one beyond 64 bits; the last is a too-large body (413), the others
// malformed (400).
bool content_length_overflows(std::string_view raw) {
  std::string lower(raw.substr(0, std::min<size_t>(raw.size(), 64 << 10)));
  for (char& c : lower) c = char(std::tolower(uint8_t(c)));
  const size_t at = lower.find("\ncontent-length:");
  if (at == std::string::npos) return false;
  size_t i = at + 16;
  while (i < lower.size() && (lower[i] == ' ' || lower[i] == '\t')) ++i;
  while (i + 1 < lower.size() && lower[i] == '0' && std::isdigit(uint8_t(lower[i + 1]))) ++i;  // leading zeros
  const size_t first = i;
  while (i < lower.size() && std::isdigit(uint8_t(lower[i]))) ++i;
  if (i == first || !(i == lower.size() || lower[i] == '\r' || lower[i] == ' ')) return false;
  const std::string_view digits = std::string_view(lower).substr(first, i - first);
  // 18446744073709551615 is the largest value 64 bits hold.
  return digits.size() > 20 || (digits.size() == 20 && digits > "18446744073709551615");
}

// A request starts with a method in capitals and a space: anything else (a TLS hello, binary
// noise) is refused at its first bytes instead of after the read timeout.
bool plausible_method(std::string_view have) {
  size_t i = 0;
  while (i < have.size() && (have[i] == '\r' || have[i] == '\n')) ++i;
  for (size_t n = 0; i < have.size(); ++i, ++n) {
    if (have[i] == ' ') return n > 0;
    if (have[i] < 'A' || have[i] > 'Z' || n >= 16) return false;
  }
  return true;
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, std::string remote, HttpShared& shared)
    : socket_(std::move(socket)), remote_(std::move(remote)), shared_(shared),
      timer_(socket_.get_executor()) {}

HttpSession::~HttpSession() {
  gen_.reset();  // cancels what still runs
  shared_.on_close(remote_);
}

void HttpSession::start() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->wait_request(); });
}

void HttpSession::abort() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    // A request read in full still gets its answer; the connection closes after it.
    if (self->phase_ == Phase::Handling || self->phase_ == Phase::Responding) {
      self->keep_alive_ = false;
      return;
    }
    self->close();
  });
}

void HttpSession::arm(std::chrono::steady_clock::duration d) {
  timer_.expires_after(d);
  timer_.async_wait([self = shared_from_this(), gen = ++timer_gen_](error_code ec) {
    if (!ec && gen == self->timer_gen_) self->on_deadline();
  });
}

void HttpSession::on_deadline() {
  switch (phase_) {
    case Phase::Header:
    case Phase::Body:
      timed_out_ = true;
      socket_.cancel();  // the read ends with operation_aborted: 408
      break;
    case Phase::Handling:
      break;
    default:
      client_gone_ = phase_ == Phase::Responding;
      close();
  }
}

// Idle until the first byte of a request: no deadline but the idle one, and the request's
// clock starts only when bytes come.
void HttpSession::wait_request() {
  phase_ = Phase::Idle;
  if (buffer_.size() > 0) return read_header();
  arm(shared_.config.idle_timeout);
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
    if (self->closed_ || self->phase_ != Phase::Idle) return;
    if (ec) return self->close();
    self->read_header();
  });
}

void HttpSession::read_header() {
  phase_ = Phase::Header;
  t0_ = Clock::now();
  stamps_ = SessionStamps{};
  stamps_.received = t0_;
  first_chunk_ = 0;
  req_ = HttpRequest{};
  req_.remote = remote_;
  status_ = 0;
  client_gone_ = false;
  timed_out_ = false;
  last_queued_ = false;
  scanned_ = 0;
  logged_ = buffer_.size() == 0;  // bytes already here (pipelined): a request has begun
  head_.emplace();
  head_->header_limit(std::uint32_t(shared_.config.max_header_bytes));
  head_->body_limit(shared_.config.max_body_bytes);
  arm(shared_.config.read_timeout);
  read_header_more();
}

// The header's bytes are collected here (not by Beast's reader) so that its raw text is at
// hand when Beast refuses a field.
void HttpSession::read_header_more() {
  const auto data = buffer_.cdata();
  const std::string_view have(static_cast<const char*>(data.data()), data.size());
  const size_t end = have.find("\r\n\r\n", scanned_ >= 3 ? scanned_ - 3 : 0);
  if (end != std::string_view::npos) return parse_header(have.substr(0, end + 4));
  scanned_ = have.size();
  if (!plausible_method(have)) {
    logged_ = false;
    return fail(400, "not an HTTP request");
  }
  if (have.size() > shared_.config.max_header_bytes) {
    logged_ = false;
    return fail(431, "the request header is too large");
  }
  socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
    self->buffer_.commit(n);
    if (self->closed_) return;
    if (n > 0) self->logged_ = false;  // a request has begun: it gets a log line
    if (ec) return self->read_error(ec == boost::asio::error::eof ? http::error::partial_message : ec);
    self->read_header_more();
  });
}

void HttpSession::parse_header(std::string_view raw) {
  error_code ec;
  const size_t used = head_->put(boost::asio::buffer(raw.data(), raw.size()), ec);
  if (ec == http::error::bad_content_length && content_length_overflows(raw))
    return fail(413, "the request body is too large");
  if (ec == http::error::bad_content_length) return fail(400, "invalid Content-Length");
  if (ec == http::error::body_limit) return fail(413, "the request body is too large");
  // The whole header can arrive in the read that crosses the limit: Beast refuses it then.
  if (ec == http::error::header_limit) return fail(431, "the request header is too large");
  if (ec) return fail(400, fmt::format("malformed request: {}", ec.message()));
  buffer_.consume(used);
  on_header();
}

void HttpSession::read_error(error_code ec) {
  if (closed_) return;
  if (timed_out_) return fail(408, "the request did not arrive in time");
  if (ec == http::error::body_limit) return fail(413, "the request body is too large");
  // A body that ended before its Content-Length with the connection half-closed: the client
  // may still read the answer (a reset makes the write fail, and the session closes).
  if (ec == http::error::partial_message && phase_ == Phase::Body)
    return fail(400, "the request body ended before its Content-Length");
  // The peer closed or reset: nobody to answer. A request cut short is logged.
  const bool parse_error = ec.category() == make_error_code(http::error::bad_method).category();
  if (ec == http::error::partial_message || !parse_error) {
    client_gone_ = phase_ == Phase::Body;
    status_ = 499;
    return close();
  }
  fail(400, fmt::format("malformed request: {}", ec.message()));
}

// The Access-Control-Allow-Origin a request from `origin` gets under `allowed` ("*", a list of
// origins, or ""): "" when its origin may not call.
static std::string cors_allow(std::string_view origin, std::string_view allowed) {
  if (origin.empty() || allowed.empty()) return "";
  if (allowed == "*") return "*";
  for (size_t at = 0; at <= allowed.size();) {
    size_t end = std::min(allowed.find(',', at), allowed.size());
    std::string_view one = allowed.substr(at, end - at);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    if (one == origin) return std::string(origin);
    at = end + 1;
  }
  return "";
}

void HttpSession::on_header() {
  const auto& h = head_->get();
  req_.method = std::string(h.method_string());
  req_.target = std::string(h.target());
  req_.path = percent_decode(req_.target.substr(0, req_.target.find('?')));
  req_.authorization = std::string(h[http::field::authorization]);
  keep_alive_ = h.keep_alive();
  http10_ = h.version() < 11;
  const auto origin = h[http::field::origin];
  cors_origin_ = cors_allow(std::string_view(origin.data(), origin.size()), shared_.config.allowed_origins);
  // A browser's preflight before a cross-origin call: which methods and headers it may send.
  if (!cors_origin_.empty() && h.method() == http::verb::options &&
      h.find(http::field::access_control_request_method) != h.end()) {
    HttpReply r;
    r.status = 204;
    r.content_type = "text/plain";
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
    // The requested headers echoed: a "*" would not cover Authorization (Fetch standard).
    const auto want = h[http::field::access_control_request_headers];
    if (!want.empty()) r.headers.emplace_back("Access-Control-Allow-Headers", std::string(want));
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    if (!head_->is_done()) keep_alive_ = false;
    return on_reply(std::move(r));
  }
  const auto expect = h[http::field::expect];
  req_.expect_continue = expect.size() == 12 && boost::beast::iequals(expect, "100-continue");
  const bool has_length = h.find(http::field::content_length) != h.end();
  logged_ = false;
  if (h.method() == http::verb::post && !has_length && !head_->chunked())
    return fail(411, "a POST needs a Content-Length (or chunked transfer encoding)");
  if (auto n = head_->content_length(); n && *n > shared_.config.max_body_bytes)
    return fail(413, fmt::format("the request body of {} bytes is larger than the limit of {}", *n,
                                 shared_.config.max_body_bytes));
  if (auto early = shared_.handler.before_body(req_)) {
    if (!head_->is_done()) keep_alive_ = false;  // the body stays unread
    return on_reply(std::move(*early));
  }
  if (head_->is_done()) return dispatch();
  if (!req_.expect_continue) return read_body();
  phase_ = Phase::Body;
  asio::async_write(socket_, asio::buffer("HTTP/1.1 100 Continue\r\n\r\n", 25),
                    [self = shared_from_this()](error_code ec, size_t) {
                      if (ec) return self->close();
                      self->read_body();
                    });
}

void HttpSession::read_body() {
  phase_ = Phase::Body;
  full_.emplace(std::move(*head_));
  head_.reset();
  full_->body_limit(shared_.config.max_body_bytes);
  // From the first body byte on, at 1 MiB/s at least.
  const uint64_t len = full_->content_length().value_or(0);
  arm(shared_.config.read_timeout + std::chrono::milliseconds(len >> 10 >> 10 << 10));
  http::async_read(socket_, buffer_, *full_,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_body(ec); });
}

void HttpSession::on_body(error_code ec) {
  if (closed_) return;
  if (ec) return read_error(ec);
  req_.body = std::move(full_->get().body());
  full_.reset();
  dispatch();
}

void HttpSession::dispatch() {
  phase_ = Phase::Handling;
  stamps_.body = Clock::now();
  ++timer_gen_;
  timer_.cancel();
  head_.reset();
  if (!shared_.handler.heavy(req_)) return on_reply(shared_.handler.handle(req_));
  // The loop's work until the answer is posted back: once the listener stops accepting, a loop
  // without pending work returns, and the answer would find none to run on.
  asio::post(shared_.workers, [self = shared_from_this(), work = asio::make_work_guard(socket_.get_executor())] {
    self->stamps_.worker = Clock::now();
    auto reply = std::make_shared<HttpReply>(self->shared_.handler.handle(self->req_));
    asio::post(self->socket_.get_executor(), [self, reply] { self->on_reply(std::move(*reply)); });
  });
}

void HttpSession::add_cors(HttpReply& r) const {
  if (cors_origin_.empty()) return;
  r.headers.emplace_back("Access-Control-Allow-Origin", cors_origin_);
  if (cors_origin_ != "*") r.headers.emplace_back("Vary", "Origin");
}

void HttpSession::on_reply(HttpReply reply) {
  if (closed_) return;
  add_cors(reply);
  phase_ = Phase::Responding;
  stamps_.replied = Clock::now();
  status_ = reply.status;
  if (!reply.gen) {
    out_ = whole_response(reply, reply.body, keep_alive_, req_.method == "HEAD");
    last_queued_ = true;
    return write_more();
  }
  gen_ = std::move(reply.gen);
  self_ = shared_from_this();  // only the engine's notifications wake it up now
  if (gen_->streaming()) {
    reply.content_type = "text/event-stream";
    reply.headers.emplace_back("Cache-Control", "no-cache");
    reply.headers.emplace_back("X-Accel-Buffering", "no");  // proxies: pass events on at once
    // HTTP/1.0 has no chunked coding: a server must not send it one (RFC 9112 6.1).
    if (http10_) keep_alive_ = false;
    out_ = response_head(200, reply, keep_alive_, !http10_, std::nullopt);
  }
  watch_peer();
  gen_->on_ready([w = weak_from_this()] {
    if (auto self = w.lock()) self->notify();
  });
  pump();
}

// From the engine's thread: at most one pump is queued at a time.
void HttpSession::notify() {
  if (notify_pending_.exchange(true)) return;
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->pump(); });
}

void HttpSession::pump() {
  notify_pending_ = false;
  if (closed_ || !gen_ || last_queued_) return;
  const std::string text = gen_->drain();
  if (gen_->streaming()) {
    if (!text.empty()) out_ += http10_ ? text : chunk(text);
    if (first_chunk_ == 0 && gen_->stamps().first_token != TimingClock::time_point{}) first_chunk_ = 1;
    if (gen_->finished()) {
      if (!http10_) out_ += "0\r\n\r\n";
      last_queued_ = true;
    }
  } else if (gen_->finished()) {
    HttpReply r;
    r.status = status_ = gen_->status();
    add_cors(r);
    out_ = whole_response(r, gen_->body(), keep_alive_, req_.method == "HEAD");
    last_queued_ = true;
  }
  write_more();
}

void HttpSession::write_more() {
  if (writing_now_ || closed_) return;
  if (out_.empty()) {
    if (last_queued_) response_done();
    return;
  }
  writing_.swap(out_);
  out_.clear();
  writing_now_ = true;
  if (first_chunk_ == 1) first_chunk_ = 2;
  arm(shared_.config.write_timeout);
  asio::async_write(socket_, asio::buffer(writing_),
                    [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
}

void HttpSession::on_write(error_code ec) {
  writing_now_ = false;
  writing_.clear();
  if (closed_) return;
  if (ec) {
    client_gone_ = true;
    return close();
  }
  if (first_chunk_ == 2) {
    first_chunk_ = 3;
    stamps_.first_written = Clock::now();
  }
  ++timer_gen_;  // no deadline while the engine works
  timer_.cancel();
  write_more();
}

// While a response is produced, a readable socket with nothing to read means the client has
// hung up (or half-closed): its requests are cancelled.
void HttpSession::watch_peer() {
  watching_ = true;
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
    if (self->closed_ || !self->watching_ || ec == asio::error::operation_aborted) return;
    char c;
    const ssize_t n = ::recv(self->socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (ec || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      // Gone after the whole response was handed to the socket: not a cancellation.
      self->client_gone_ = !(self->last_queued_ && self->out_.empty());
      if (!self->client_gone_) self->log_request();
      return self->close();
    }
    if (n > 0) {
      self->watching_ = false;  // a pipelined request: it waits for this response to finish
      return;
    }
    self->watch_peer();  // woken without data (readiness left from the request): watch on
  });
}

void HttpSession::response_done() {
  log_request();
  gen_.reset();
  auto self = std::move(self_);
  if (watching_) {
    watching_ = false;
    error_code ec;
    socket_.cancel(ec);
  }
  if (!keep_alive_) return linger_close();
  wait_request();
}

void HttpSession::fail(int status, const std::string& message) {
  keep_alive_ = false;
  on_reply(error_reply(ApiError(status, message)));
}

// Ends the connection after an answer the client may still be sending a body to: stop
// writing, read and drop what comes for a moment, then close (closing with unread data would
// reset the connection and could destroy the answer in flight).
void HttpSession::linger_close() {
  phase_ = Phase::Closing;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  arm(std::chrono::seconds(1));
  socket_.async_read_some(asio::buffer(discard_), [self = shared_from_this()](error_code ec, size_t) {
    if (ec || self->closed_) return self->close();
    self->socket_.async_read_some(asio::buffer(self->discard_),
                                  [self](error_code, size_t) { self->close(); });
  });
}

void HttpSession::close() {
  if (closed_) return;
  if (!logged_) {
    if (client_gone_ && status_ == 0) status_ = 499;
    log_request();
  }
  closed_ = true;
  ++timer_gen_;
  timer_.cancel();
  gen_.reset();  // cancels unfinished requests
  auto self = std::move(self_);
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void HttpSession::log_request() {
  if (logged_) return;
  logged_ = true;
  HttpLogEntry e;
  if (!req_.method.empty()) {
    e.method = req_.method;
    e.path = req_.path;
  }
  e.status = status_ != 0 ? status_ : 499;
  if (gen_) {
    e.prompt_tokens = gen_->prompt_tokens();
    e.completion_tokens = gen_->completion_tokens();
    if (shared_.config.log_timing) e.timing = timing_line(stamps_, gen_->stamps(), gen_->engine_times());
  }
  e.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0_).count();
  e.client_gone = client_gone_;
  shared_.handler.log(e);
}

}  // namespace lite_llama::server
