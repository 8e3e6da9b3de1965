// serve's HTTP edge against hostile clients (issue 30, items 10-12): an in-process HttpServer over
// a page of static files (no index), spoken to over raw loopback sockets.
#include "stages/serve/http_edge.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "stages/serve/api.h"
#include "stages/serve/http_server.h"

namespace tessera::serve {
namespace {

using Clock = std::chrono::steady_clock;

// A test's server: Api with the page files only (routes that need an index are not asked).
struct Served {
  explicit Served(Config c) : config(std::move(c)) {
    config.port = 0;
    std::map<std::string, std::string> files;
    files["/index.html"] = "<p>hello</p>";
    files["/big.js"] = std::string(353 << 10, 'j');
    for (int i = 0; i < 10; ++i) files["/" + std::to_string(i) + ".txt"] = "file " + std::to_string(i);
    api = std::make_unique<Api>(nullptr, batcher, metrics, config, files, "", 1);
    server = std::make_unique<HttpServer>(*api, config);
    server->start();
  }
  Config config;
  Batcher batcher;
  Metrics metrics;
  std::unique_ptr<Api> api;
  std::unique_ptr<HttpServer> server;
};

class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval t{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
  }
  ~Client() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& data) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `done(received)`, the peer closes, or `seconds` pass; returns what arrived.
  template <typename Done>
  std::string read_until(Done done, double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (!done(in_) && !closed_ && Clock::now() < deadline) {
      timeval t{0, 50000};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n > 0) in_.append(buffer, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed_ = true;
    }
    return in_;
  }
  std::string read_all(double seconds) {
    return read_until([](const std::string&) { return false; }, seconds);
  }
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
  std::string in_;
};

struct Answer {
  int status = 0;
  std::string head, body;
};

// The complete answers at the start of `bytes` (each with a Content-Length).
std::vector<Answer> answers(const std::string& bytes) {
  std::vector<Answer> out;
  size_t pos = 0;
  while (true) {
    const size_t end = bytes.find("\r\n\r\n", pos);
    if (end == std::string::npos) break;
    Answer a;
    a.head = bytes.substr(pos, end + 4 - pos);
    a.status = std::atoi(a.head.substr(9, 3).c_str());
    const size_t length = a.head.find("Content-Length: ");
    const size_t size = length == std::string::npos ? 0 : std::stoul(a.head.substr(length + 16));
    if (bytes.size() < end + 4 + size) break;
    a.body = bytes.substr(end + 4, size);
    pos = end + 4 + size;
    out.push_back(std::move(a));
  }
  return out;
}

auto has_answers(size_t n) {
  return [n](const std::string& in) { return answers(in).size() >= n; };
}

// Item 10a: 1,000 ranges `0-` of a 353 KB script came back as 353 MB.
TEST(ServeHttpEdge, ARangeHeaderOfManyRangesIsRefusedNotMultiplied) {
  Served s{Config{}};
  std::string ranges = "bytes=0-";
  for (int i = 1; i < 1000; ++i) ranges += ",0-";
  Client c(s.server->port());
  ASSERT_TRUE(c.send("GET /big.js HTTP/1.1\r\nHost: x\r\nRange: " + ranges + "\r\n\r\n"));
  const std::string in = c.read_until(has_answers(1), 5);
  ASSERT_EQ(answers(in).size(), 1u) << in.substr(0, 200);
  EXPECT_EQ(answers(in)[0].status, 416);
  EXPECT_LT(in.size(), 4096u);
  // A few ranges are still served.
  Client few(s.server->port());
  ASSERT_TRUE(few.send("GET /big.js HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9,20-29\r\n\r\n"));
  const std::vector<Answer> a = answers(few.read_until(has_answers(1), 5));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 206);
  EXPECT_LT(a[0].body.size(), 1024u);
  // Past the end: 416; an error answer goes whole (not cut into ranges).
  ASSERT_TRUE(few.send("GET /big.js HTTP/1.1\r\nHost: x\r\nRange: bytes=400000-\r\n\r\n"
                       "GET /none.js HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\n\r\n"));
  const std::vector<Answer> b = answers(few.read_until(has_answers(3), 5));
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[1].status, 416);
  EXPECT_EQ(b[2].status, 404);
  EXPECT_NE(b[2].body.find("\"code\":404"), std::string::npos) << b[2].body;
}

// Item 10b: a chunked body was read whole whatever the limit (+620 MB for 300 MB).
TEST(ServeHttpEdge, AChunkedBodyIsReadOnlyUpToTheLimit) {
  Config config;
  config.limits.max_body_bytes = 64 << 10;
  Served s{config};
  Client c(s.server->port());
  ASSERT_TRUE(c.send("POST /api/v1/search HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "400\r\n" + std::string(1024, 'x') + "\r\n";
  for (int i = 0; i < 256 && c.send(chunk); ++i) {
  }
  // The body never ends: only a server that stops reading at the limit answers.
  const std::vector<Answer> a = answers(c.read_until(has_answers(1), 3));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 413);
  EXPECT_NE(a[0].head.find("Connection: close"), std::string::npos);
}

// Item 10b: a body without Content-Length was read until the client closed.
TEST(ServeHttpEdge, ABodyWithoutALengthIsNotReadAsABody) {
  Served s{Config{}};
  Client c(s.server->port());
  ASSERT_TRUE(c.send("POST /index.html HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(256 << 10, 'x')));
  // The POST has no body (405); what follows is no request line (414), and the connection is
  // closed.
  const std::string in = c.read_all(3);
  const std::vector<Answer> a = answers(in);
  ASSERT_EQ(a.size(), 2u) << in.substr(0, 300);
  EXPECT_EQ(a[0].status, 405);
  EXPECT_EQ(a[1].status, 414);
  EXPECT_TRUE(c.closed());
}

// Item 10c: 200,000 headers of 1 KB were all read and kept.
TEST(ServeHttpEdge, AHeadOfManyHeadersIsRefused) {
  Served s{Config{}};
  Client c(s.server->port());
  std::string head = "GET /index.html HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 2000; ++i) head += "X-" + std::to_string(i) + ": " + std::string(90, 'h') + "\r\n";
  ASSERT_TRUE(c.send(head + "\r\n"));
  const std::vector<Answer> a = answers(c.read_until(has_answers(1), 5));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 431);
  EXPECT_NE(a[0].body.find("\"code\":431"), std::string::npos) << a[0].body;
}

// Item 11: sockets that trickle their heads held every HTTP thread; no probe was answered.
TEST(ServeHttpEdge, AProbeIsAnsweredWhileSlowClientsHoldTheirConnections) {
  Config config;
  config.http_threads = 2;
  config.limits.header_timeout_s = 2;
  Served s{config};
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<Client>(s.server->port()));
    ASSERT_TRUE(slow.back()->send("GET /index.html HTTP/1.1\r\nHost: x\r\nX-"));
  }
  Client probe(s.server->port());
  ASSERT_TRUE(probe.send("GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::vector<Answer> a = answers(probe.read_until(has_answers(1), 1.5));
  ASSERT_EQ(a.size(), 1u) << "no answer while 8 slow clients are connected";
  EXPECT_EQ(a[0].status, 200);
  EXPECT_EQ(slow[0]->read_all(0.01), "");  // still open, still waiting
  // The head's deadline ends each slow connection with 408.
  const std::vector<Answer> late = answers(slow[0]->read_until(has_answers(1), 5));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].status, 408);
}

// More slow clients than connections allowed: the one that has waited longest makes room.
TEST(ServeHttpEdge, AtTheConnectionLimitTheLongestWaitingMakesRoom) {
  Config config;
  config.limits.max_connections = 4;
  Served s{config};
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 6; ++i) {
    slow.push_back(std::make_unique<Client>(s.server->port()));
    ASSERT_TRUE(slow.back()->send("GET /index.html HTTP/1.1\r\nX-"));
    slow.back()->read_all(0.05);  // accepted before the next
  }
  Client probe(s.server->port());
  ASSERT_TRUE(probe.send("GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::vector<Answer> a = answers(probe.read_until(has_answers(1), 3));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, 200);
  slow[0]->read_all(0.05);
  EXPECT_TRUE(slow[0]->closed());
}

// Partial bodies on many connections cannot add up: beyond the edge's budget the connection that
// holds the most is refused, the others go on.
TEST(ServeHttpEdge, WhatAllConnectionsHoldTogetherIsBounded) {
  EdgeLimits limits;
  limits.head.max_body_bytes = 64 << 10;
  limits.max_buffered_bytes = 100 << 10;
  HttpEdge edge(
      "127.0.0.1", 0, limits, 1,
      [](int fd, std::string_view, bool) {
        return edge_write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 5);
      },
      [](int, const std::string& reason) { return reason; });
  edge.start();
  Client a(edge.port()), b(edge.port());
  ASSERT_TRUE(a.send("POST / HTTP/1.1\r\nContent-Length: 60000\r\n\r\n" + std::string(45000, 'a')));
  a.read_all(0.1);
  ASSERT_TRUE(b.send("POST / HTTP/1.1\r\nContent-Length: 60000\r\n\r\n" + std::string(58000, 'b')));
  const std::vector<Answer> refused = answers(b.read_until(has_answers(1), 3));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].status, 503);
  ASSERT_TRUE(a.send(std::string(15000, 'a')));
  const std::vector<Answer> answered = answers(a.read_until(has_answers(1), 3));
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0].status, 200);
}

// The edge answers `Expect: 100-continue` before the body, and the library does not answer it again.
TEST(ServeHttpEdge, AnExpectationIsAnsweredOnceBeforeTheBody) {
  Served s{Config{}};
  Client c(s.server->port());
  ASSERT_TRUE(c.send("POST /index.html HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     "Content-Length: 5\r\n\r\n"));
  const std::string interim = c.read_until(has_answers(1), 5);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.send("hello"));
  const std::vector<Answer> a = answers(c.read_until(has_answers(2), 5));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].status, 405);
}

// Item 12: of requests written at once on one connection, one was answered.
TEST(ServeHttpEdge, PipelinedRequestsAreAnsweredInOrder) {
  Served s{Config{}};
  Client c(s.server->port());
  std::string requests;
  for (int i = 0; i < 100; ++i) {
    requests += "GET /" + std::to_string(i % 10) + ".txt HTTP/1.1\r\nHost: x\r\n" +
                (i == 99 ? "Connection: close\r\n" : "") + "\r\n";
  }
  ASSERT_TRUE(c.send(requests));
  const std::vector<Answer> a = answers(c.read_until(has_answers(100), 5));
  ASSERT_EQ(a.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a[static_cast<size_t>(i)].status, 200);
    EXPECT_EQ(a[static_cast<size_t>(i)].body, "file " + std::to_string(i % 10)) << i;
  }
  c.read_all(2);
  EXPECT_TRUE(c.closed()) << "open after a request that said Connection: close";
}

}  // namespace
}  // namespace tessera::serve
