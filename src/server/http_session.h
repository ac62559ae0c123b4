// One HTTP/1.1 connection on an event loop (Boost.Asio + Beast's parser): no thread is held
// while a client is idle, slow or streaming. Deadlines: the header and the body must each
// arrive within read_timeout of their first byte (408), an idle kept-alive connection closes
// after idle_timeout, a client that stops reading its response is dropped after write_timeout.
// Length problems are answered as soon as the header is complete (411, 400, 413, 431).
#pragma once
#include <utility>  // Boost 1.74's Asio misses it under C++20

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_types.h"
#include "server/request_timing.h"

namespace lite_llama::server {

// What every session of a listener shares.
struct HttpShared {
  HttpHandler& handler;
  HttpConfig config;
  boost::asio::thread_pool& workers;
  // Called when a session ends (the listener's connection counts).
  std::function<void(const std::string& remote)> on_close;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  using tcp = boost::asio::ip::tcp;
  HttpSession(tcp::socket socket, std::string remote, HttpShared& shared);
  ~HttpSession();
  void start();
  // Server shutdown: closes at once, or after the answer to a request already read; safe from
  // any thread.
  void abort();

 private:
  enum class Phase { Idle, Header, Body, Handling, Responding, Closing };
  using Clock = std::chrono::steady_clock;
  using error_code = boost::system::error_code;

  void wait_request();
  void read_header();
  void read_header_more();
  void parse_header(std::string_view raw);
  void on_header();
  void add_cors(HttpReply& r) const;  // Access-Control-Allow-Origin, where the request may have it
  void read_body();
  void on_body(error_code ec);
  void dispatch();
  void on_reply(HttpReply reply);
  void notify();
  void pump();
  void write_more();
  void on_write(error_code ec);
  void watch_peer();
  void response_done();
  void fail(int status, const std::string& message);
  void read_error(error_code ec);
  void arm(std::chrono::steady_clock::duration d);
  void on_deadline();
  void linger_close();
  void close();
  void log_request();

  tcp::socket socket_;
  std::string remote_;
  HttpShared& shared_;
  boost::asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  size_t scanned_ = 0;  // header bytes searched for its end
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> head_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> full_;
  HttpRequest req_;
  std::unique_ptr<Generation> gen_;
  std::shared_ptr<HttpSession> self_;  // held while a generation runs
  Phase phase_ = Phase::Idle;
  Clock::time_point t0_;
  int status_ = 0;
  bool keep_alive_ = true, timed_out_ = false, last_queued_ = false, writing_now_ = false;
  bool watching_ = false, client_gone_ = false, closed_ = false, logged_ = true, http10_ = false;
  std::string out_, writing_;
  std::atomic<bool> notify_pending_{false};
  SessionStamps stamps_;
  std::string cors_origin_;  // Access-Control-Allow-Origin for this request's answer; "" none
  int first_chunk_ = 0;  // the first token's chunk: 1 queued in out_, 2 being written, 3 written
  std::array<char, 512> discard_;
};

}  // namespace lite_llama::server
