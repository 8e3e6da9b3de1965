#include "stages/serve/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <httplib.h>

#include <spdlog/spdlog.h>

#include "common/core/error.h"

namespace tessera::serve {

struct HttpServer::Impl {
  httplib::Server server;
};

namespace {

void answer(Api& api, const httplib::Request& in, httplib::Response& out) {
  Request r;
  r.method = in.method;
  r.path = in.path;
  for (const auto& [key, value] : in.params) r.params.emplace(key, value);
  r.body = in.body;
  r.authorization = in.get_header_value("Authorization");
  r.cookie = in.get_header_value("Cookie");
  const Response response = api.handle(r);
  out.status = response.status;
  for (const auto& [key, value] : response.headers) out.set_header(key, value);
  out.set_content(response.body, response.content_type.c_str());
}

// cpp-httplib (Debian's, compiled) listens with a backlog of 5: a burst of connections overflowed
// it and some were reset (150 at once: 3-30%). listen() again on the bound socket raises the
// backlog (the kernel caps it at net.core.somaxconn); the socket is found among this process's
// descriptors as the listening one bound to `port`.
void raise_listen_backlog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t size = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening) continue;
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) continue;
    int bound = -1;
    if (address.ss_family == AF_INET) {
      bound = ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
    } else if (address.ss_family == AF_INET6) {
      bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
    }
    if (bound == port && ::listen(fd, SOMAXCONN) != 0) {
      spdlog::warn("cannot raise the listen backlog of port {}: {}", port, std::strerror(errno));
    }
  }
}

}  // namespace

HttpServer::HttpServer(Api& api, const Config& config) : impl_(std::make_unique<Impl>()) {
  httplib::Server& s = impl_->server;
  const int threads = config.http_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(config.limits.max_body_bytes);
  // Headers and body go out in separate writes: without TCP_NODELAY Nagle's algorithm holds the
  // body for the client's delayed ACK, about 40 ms a request (benchmarks/http_choice_bench).
  s.set_tcp_nodelay(true);
  // A connection holds a pool thread while it is open (also idle between keep-alive requests):
  // short timeouts bound how long slow or idle clients keep the others waiting.
  s.set_read_timeout(std::chrono::seconds(5));
  s.set_write_timeout(std::chrono::seconds(10));
  s.set_keep_alive_timeout(5);
  const auto handler = [&api](const httplib::Request& in, httplib::Response& out) {
    answer(api, in, out);
  };
  const char* any = R"(/.*)";
  s.Get(any, handler);
  s.Post(any, handler);
  s.Put(any, handler);
  s.Delete(any, handler);
  s.Patch(any, handler);
  s.Options(any, handler);
  // Errors the library answers itself (a body over the limit, a malformed request line) also get
  // the JSON error body.
  s.set_error_handler([](const httplib::Request&, httplib::Response& out) {
    if (out.body.empty()) {
      const Response e = error_response(
          out.status, out.status == 413 ? "the request body is over the limit"
                      : out.status == 414 ? "the request line is too long"
                      : out.status < 500  ? "malformed request"
                                          : "internal error");
      out.set_content(e.body, e.content_type.c_str());
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& out, std::exception_ptr) {
    const Response e = error_response(500, "internal error");
    out.status = 500;
    out.set_content(e.body, e.content_type.c_str());
  });
  if (config.port == 0) {
    port_ = s.bind_to_any_port(config.bind);
    if (port_ <= 0) fail<IoError>("cannot listen on {} (any port)", config.bind);
  } else {
    if (!s.bind_to_port(config.bind, config.port)) {
      fail<IoError>("cannot listen on {}:{} (in use, or not an address of this machine)",
                    config.bind, config.port);
    }
    port_ = config.port;
  }
  raise_listen_backlog(port_);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
}

void HttpServer::stop() {
  impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::serve
