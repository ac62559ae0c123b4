#include "server/http_listener.h"

#include <sys/resource.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "core/error.h"
#include "server/http_session.h"
#include "server/openai_response.h"

namespace lite_llama::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr int kListenBacklog = 1024;

// Thousands of connections need more descriptors than the usual soft limit of 1024.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

HttpListener::HttpListener(HttpHandler& handler, const HttpConfig& config)
    : config_(config), workers_(size_t(std::max(1, config.worker_threads))), acceptor_(ioc_), retry_(ioc_) {
  shared_ = std::make_unique<HttpShared>(
      HttpShared{handler, config_, workers_, [this](const std::string& r) { closed(r); }});
  raise_fd_limit();
}

HttpListener::~HttpListener() { stop(); }

int HttpListener::bind(const std::string& host, int port) {
  boost::system::error_code ec;
  tcp::resolver resolver(ioc_);
  const auto results = resolver.resolve(host, std::to_string(port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  LL_CHECK(!ec && !results.empty(), "cannot listen on {}:{}: {}", host, port,
           ec ? ec.message() : "no address");
  const tcp::endpoint ep = results.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(kListenBacklog, ec);
  LL_CHECK(!ec, "cannot listen on {}:{}: {}", host, port, ec.message());
  return acceptor_.local_endpoint().port();
}

void HttpListener::start() {
  accept();
  for (int i = 0; i < std::max(1, config_.io_threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
}

void HttpListener::accept() {
  acceptor_.async_accept(asio::make_strand(ioc_),
                         [this](boost::system::error_code ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void HttpListener::on_accept(boost::system::error_code ec, tcp::socket s) {
  if (!acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors or memory: wait a little rather than spin.
    retry_.expires_after(std::chrono::milliseconds(50));
    retry_.async_wait([this](boost::system::error_code e) {
      if (!e) accept();
    });
    return;
  }
  boost::system::error_code e2;
  const std::string remote = s.remote_endpoint(e2).address().to_string();
  s.set_option(tcp::no_delay(true), e2);  // each SSE event goes out at once
  std::shared_ptr<HttpSession> session;
  int status = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_ >= config_.max_connections) status = 503;
    else if (per_client_[remote] >= config_.max_connections_per_client) status = 429;
    if (status == 0) {
      ++open_;
      ++per_client_[remote];
      session = std::make_shared<HttpSession>(std::move(s), remote, *shared_);
      if (sessions_.size() > size_t(2 * open_ + 64))  // drop the expired ones now and then
        std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
      sessions_.push_back(session);
    } else if (per_client_[remote] == 0) {
      per_client_.erase(remote);
    }
  }
  if (session) session->start();
  else refuse(std::move(s), status, status == 503 ? "too many connections" : "too many connections from " + remote);
  accept();
}

// The answer fits the socket buffer of a fresh connection: written at once, then closed.
void HttpListener::refuse(tcp::socket s, int status, const std::string& message) {
  const std::string body = dump(error_json(ApiError(status, message, "", "too_many_connections")));
  const std::string msg = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  HttpLogEntry e;
  e.status = status;
  shared_->handler.log(e);
  boost::system::error_code ec;
  s.non_blocking(true, ec);
  asio::write(s, asio::buffer(msg), ec);
  s.shutdown(tcp::socket::shutdown_send, ec);
  s.close(ec);
}

void HttpListener::closed(const std::string& remote) {
  std::lock_guard<std::mutex> lock(mu_);
  --open_;
  if (--per_client_[remote] <= 0) per_client_.erase(remote);
}

int HttpListener::open_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

void HttpListener::stop_accepting() {
  asio::post(ioc_, [this] {
    boost::system::error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
  });
}

void HttpListener::stop() {
  std::vector<std::shared_ptr<HttpSession>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& w : sessions_)
      if (auto s = w.lock()) live.push_back(std::move(s));
    sessions_.clear();
  }
  for (auto& s : live) s->abort();
  live.clear();  // outside the lock: a session's destructor takes it
  stop_accepting();
  // The sessions close on their strands; give them a moment, then stop the loops.
  for (int i = 0; i < 200 && open_connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  workers_.join();
}

}  // namespace lite_llama::server
