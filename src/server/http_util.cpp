#include "server/http_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "server/openai_response.h"

namespace lite_llama::server {

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_json(e)); }

RequestTrace& request_trace() {
  thread_local RequestTrace t;
  return t;
}

namespace {

// Numeric host and port of a socket address, written the way cpp-httplib writes them.
bool host_port(const sockaddr_storage& a, socklen_t len, std::string* host, int* port) {
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = h;
  *port = std::atoi(p);
  return true;
}

bool matches(int fd, const httplib::Request& req) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  std::string host;
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (!host_port(a, len, &host, &port) || port != req.remote_port || host != req.remote_addr)
    return false;
  len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  return host_port(a, len, &host, &port) && port == req.local_port;
}

// Calls f(fd) for each open socket of the process until it returns true.
template <typename F>
void for_each_socket(F&& f) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    struct stat st {};
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (f(int(fd))) break;
  }
  closedir(d);
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& req) {
  if (req.remote_port <= 0 || req.local_port <= 0) return;
  for_each_socket([&](int fd) {
    if (!matches(fd, req)) return false;
    fd_ = fd;
    return true;
  });
}

void shutdown_connections(int local_port) {
  for_each_socket([&](int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    std::string host;
    int port = 0;
    // Accepted connections have a peer; the listening socket has none.
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && host_port(a, len, &host, &port) &&
        port == local_port) {
      len = sizeof(a);
      if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) shutdown(fd, SHUT_RDWR);
    }
    return false;
  });
}

void raise_listen_backlog(int local_port, int backlog) {
  for_each_socket([&](int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    std::string host;
    int port = 0;
    int listening = 0;
    socklen_t ll = sizeof(listening);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !host_port(a, len, &host, &port) ||
        port != local_port)
      return false;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) != 0 || !listening) return false;
    listen(fd, backlog);
    return true;
  });
}

std::string log_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  // Readable: either a pipelined next request (alive) or end of stream (closed).
  char c;
  return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace lite_llama::server
