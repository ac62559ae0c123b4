// The listening socket, the event-loop threads and the connection caps of the HTTP layer.
#pragma once
#include <utility>  // Boost 1.74's Asio misses it under C++20

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_types.h"

namespace lite_llama::server {

struct HttpShared;
class HttpSession;

class HttpListener {
 public:
  HttpListener(HttpHandler& handler, const HttpConfig& config);
  ~HttpListener();
  // Binds and listens (backlog 1024, SO_REUSEADDR only: a port another server holds fails).
  // Throws lite_llama::Error with one line. Returns the port (port 0 picks a free one).
  int bind(const std::string& host, int port);
  // Starts accepting on the event-loop threads; returns at once.
  void start();
  // Stops accepting new connections (shutdown: requests already read carry on).
  void stop_accepting();
  // Closes every connection, stops the loops and joins their threads.
  void stop();
  int open_connections() const;

 private:
  void accept();
  void on_accept(boost::system::error_code ec, boost::asio::ip::tcp::socket s);
  void refuse(boost::asio::ip::tcp::socket s, int status, const std::string& message);
  void closed(const std::string& remote);

  // Declared so that the io_context (whose pending handlers may hold the last reference to a
  // session) goes before what a session's destructor uses: the counts and shared_.
  HttpConfig config_;
  mutable std::mutex mu_;
  std::map<std::string, int> per_client_;
  int open_ = 0;
  bool stopped_ = false;
  boost::asio::thread_pool workers_;
  std::unique_ptr<HttpShared> shared_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  std::vector<std::thread> threads_;
  std::vector<std::weak_ptr<HttpSession>> sessions_;
};

}  // namespace lite_llama::server
