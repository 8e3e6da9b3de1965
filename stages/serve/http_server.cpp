#include "stages/serve/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

#include <httplib.h>

#include <spdlog/spdlog.h>

#include "stages/serve/http_edge.h"

namespace tessera::serve {

namespace {

void answer_by_api(Api& api, const httplib::Request& in, httplib::Response& out) {
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
  // The library cuts the ranges (at most HeadLimits::max_ranges, http_edge.h) out of whatever the
  // answer is, and keeps its status: only a whole 200 answer is cut, as a 206, and only when every
  // range lies within it; any other answer goes whole.
  auto& ranges = const_cast<httplib::Request&>(in).ranges;  // the library's own, not const
  if (ranges.empty()) return;
  const auto size = static_cast<ssize_t>(response.body.size());
  const bool within = std::all_of(ranges.begin(), ranges.end(), [size](const auto& range) {
    return range.first < 0 ? range.second > 0 && size > 0
                           : range.first < size && (range.second < 0 || range.first <= range.second);
  });
  if (response.status != 200) {
    ranges.clear();
  } else if (!within) {
    ranges.clear();
    const Response e = error_response(416, "a range is outside the " + std::to_string(size) +
                                               " bytes of the answer");
    out.status = 416;
    out.set_header("Content-Range", "bytes */" + std::to_string(size));
    out.set_content(e.body, e.content_type.c_str());
  } else {
    out.status = 206;
  }
}

// The library's request handling on a request the edge has read whole: `request` is read, answers
// go to the socket.
class EdgeStream final : public httplib::Stream {
 public:
  // The whole answer must be taken within `write_timeout_s`: a client that reads slowly holds a
  // worker no longer than that.
  EdgeStream(int fd, std::string_view request, double write_timeout_s)
      : fd_(fd), request_(request),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(write_timeout_s))) {}
  bool is_readable() const override { return read_ < request_.size(); }
  bool is_writable() const override { return writable_; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - read_);
    std::memcpy(ptr, request_.data() + read_, n);
    read_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    const std::chrono::duration<double> left = deadline_ - std::chrono::steady_clock::now();
    writable_ = writable_ && edge_write(fd_, std::string_view(ptr, size), left.count());
    return writable_ ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  // The library asks only to refuse descriptors its select() cannot watch; this stream never
  // selects, so it names none beyond FD_SETSIZE.
  socket_t socket() const override { return fd_ < FD_SETSIZE ? fd_ : 0; }

 private:
  template <typename Name>
  void address(Name name, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    char text[INET6_ADDRSTRLEN] = {};
    if (name(fd_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  std::string_view request_;
  size_t read_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  bool writable_ = true;
};

EdgeLimits edge_limits(const Config& config) {
  EdgeLimits e;
  e.head.max_body_bytes = config.limits.max_body_bytes;
  e.header_timeout_s = config.limits.header_timeout_s;
  e.max_connections = config.limits.max_connections;
  return e;
}

}  // namespace

struct HttpServer::Impl {
  // The library's parsing, routing and answer writing, driven by the edge instead of its own
  // accept loop.
  class EdgeServer final : public httplib::Server {
   public:
    // Answers one request; false when the connection must be closed.
    bool answer(httplib::Stream& stream, bool last) {
      bool closed = false;
      const bool ok = process_request(stream, last, closed, nullptr);
      return ok && !closed;
    }
  };
  EdgeServer server;
  std::unique_ptr<HttpEdge> edge;
};

HttpServer::HttpServer(Api& api, const Config& config) : impl_(std::make_unique<Impl>()) {
  httplib::Server& s = impl_->server;
  // The edge reads every request whole within the limits; these are the library's second line.
  s.set_payload_max_length(config.limits.max_body_bytes);
  s.set_keep_alive_timeout(5);
  s.set_keep_alive_max_count(1000);
  const auto handler = [&api](const httplib::Request& in, httplib::Response& out) {
    answer_by_api(api, in, out);
  };
  const char* any = R"(/.*)";
  s.Get(any, handler);
  s.Post(any, handler);
  s.Put(any, handler);
  s.Delete(any, handler);
  s.Patch(any, handler);
  s.Options(any, handler);
  // Errors the library answers itself (a malformed request line) also get the JSON error body.
  s.set_error_handler([&api](const httplib::Request&, httplib::Response& out) {
    if (out.body.empty()) {
      const Response e = error_response(
          out.status, out.status == 413 ? "the request body is over the limit"
                      : out.status == 414 ? "the request line is too long"
                      : out.status < 500  ? "malformed request"
                                          : "internal error");
      out.set_content(e.body, e.content_type.c_str());
      api.count_edge_answer(out.status);
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& out, std::exception_ptr) {
    const Response e = error_response(500, "internal error");
    out.status = 500;
    out.set_content(e.body, e.content_type.c_str());
  });
  EdgeLimits limits = edge_limits(config);
  const double write_timeout_s = limits.write_timeout_s;
  Impl::EdgeServer* server = &impl_->server;
  impl_->edge = std::make_unique<HttpEdge>(
      config.bind, config.port, limits, config.http_threads,
      [server, write_timeout_s](int fd, std::string_view request, bool last) {
        EdgeStream stream(fd, request, write_timeout_s);
        return server->answer(stream, last);
      },
      [&api](int status, const std::string& reason) {
        api.count_edge_answer(status);
        return error_response(status, reason).body;
      });
  port_ = impl_->edge->port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() { impl_->edge->start(); }

void HttpServer::stop() { impl_->edge->stop(); }

}  // namespace tessera::serve
