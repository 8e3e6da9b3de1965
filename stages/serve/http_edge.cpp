#include "stages/serve/http_edge.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/core/error.h"

namespace tessera::serve {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration edge_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// A refused connection is read (and what it sends thrown away) this long after its answer, so
// that closing it with unread input does not reset the connection before the client reads why.
constexpr double kEdgeDrainSeconds = 2;

const char* edge_reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

struct HttpEdge::Connection {
  enum State { kReading, kBusy, kDraining };
  int fd = -1;
  State state = kReading;
  std::string in;  // received and not yet answered
  Clock::time_point since;     // accept, the last answer, or the first byte of a request
  Clock::time_point deadline;  // of the current wait
  bool has_head = false;
  RequestHead head;
  Clock::time_point head_done;
  ChunkedScan chunked;
  size_t request_bytes = 0;  // with kBusy: the request's length at the start of `in`
  int answered = 0;
};

bool edge_write(int fd, std::string_view data, double timeout_s) {
  const auto deadline = Clock::now() + edge_duration(timeout_s);
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                              Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

HttpEdge::HttpEdge(const std::string& host, int port, const EdgeLimits& limits, int workers,
                   Handler handler, Refusal refusal)
    : limits_(limits), handler_(std::move(handler)), refusal_(std::move(refusal)),
      workers_(workers) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    fail<IoError>("cannot listen on {}:{} (not an address of this machine)", host, port);
  }
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                            a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    fail<IoError>("cannot listen on {}:{} (in use, or not an address of this machine)", host,
                  port == 0 ? std::string("any port") : std::to_string(port));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6
                    ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                    : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) fail<IoError>("epoll: {}", std::strerror(errno));
  for (const int fd : {listen_fd_, wake_fd_}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
  }
}

HttpEdge::~HttpEdge() {
  stop();
  for (const int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpEdge::start() {
  for (int i = 0; i < workers_; ++i) pool_.emplace_back([this] { work(); });
  thread_ = std::thread([this] { loop(); });
}

void HttpEdge::stop() {
  if (stopping_.exchange(true)) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool_stop_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : pool_) t.join();
  // What the workers gave back after the edge's thread ended.
  for (Connection* c : returned_) {
    close(*c);
    delete c;
  }
  returned_.clear();
}

void HttpEdge::watch(Connection& c, bool add) {
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = c.fd;
  ::epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c.fd, &e);
}

void HttpEdge::close(Connection& c) {
  buffered_.fetch_sub(static_cast<int64_t>(c.in.size()));
  ::close(c.fd);
  open_.fetch_sub(1);
}

void HttpEdge::loop() {
  std::vector<epoll_event> events(256);
  auto last_expiry = Clock::now();
  while (!stopping_.load()) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
        std::deque<Connection*> back;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          back.swap(returned_);
        }
        for (Connection* c : back) {
          table_[static_cast<size_t>(c->fd)].reset(c);
          c->state = Connection::kReading;
          watch(*c, true);
          advance(*c);  // requests pipelined behind the one answered
        }
      } else if (static_cast<size_t>(fd) < table_.size() && table_[static_cast<size_t>(fd)]) {
        read_from(*table_[static_cast<size_t>(fd)]);
      }
    }
    if (Clock::now() - last_expiry > std::chrono::milliseconds(50)) {
      expire();
      last_expiry = Clock::now();
    }
  }
  for (auto& c : table_) {
    if (c) close(*c);
  }
  table_.clear();
}

void HttpEdge::accept_all() {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (Clock::now() - accept_warned_ > std::chrono::seconds(10)) {
          spdlog::warn("cannot accept a connection: {}", std::strerror(errno));
          accept_warned_ = Clock::now();
        }
        evict_one();  // out of descriptors: make room for the next
      }
      return;
    }
    open_.fetch_add(1);
    if (open_.load() > limits_.max_connections) evict_one();
    if (open_.load() > limits_.max_connections) {  // every other one is being answered
      ::close(fd);
      open_.fetch_sub(1);
      continue;
    }
    const int yes = 1;
    // Headers and body go out in separate writes: without TCP_NODELAY Nagle's algorithm holds the
    // body for the client's delayed ACK, about 40 ms a request (benchmarks/http_choice_bench).
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->since = Clock::now();
    c->deadline = c->since + edge_duration(limits_.idle_timeout_s);
    if (table_.size() <= static_cast<size_t>(fd)) table_.resize(static_cast<size_t>(fd) + 64);
    watch(*c, true);
    table_[static_cast<size_t>(fd)] = std::move(c);
  }
}

void HttpEdge::evict_one() {
  Connection* victim = nullptr;
  for (auto& c : table_) {
    if (!c) continue;
    if (victim == nullptr || (c->state == Connection::kDraining) >
                                 (victim->state == Connection::kDraining) ||
        ((c->state == Connection::kDraining) == (victim->state == Connection::kDraining) &&
         c->since < victim->since)) {
      victim = c.get();
    }
  }
  if (victim == nullptr) return;
  const int fd = victim->fd;
  close(*victim);
  table_[static_cast<size_t>(fd)].reset();
}

void HttpEdge::relieve() {
  while (buffered_.load() > static_cast<int64_t>(limits_.max_buffered_bytes)) {
    Connection* largest = nullptr;
    for (auto& c : table_) {
      if (c && c->state == Connection::kReading && (!largest || c->in.size() > largest->in.size())) {
        largest = c.get();
      }
    }
    if (largest == nullptr || largest->in.empty()) return;
    refuse(*largest, 503, "the service holds too many request bytes now; try again");
  }
}

void HttpEdge::read_from(Connection& c) {
  char buffer[64 << 10];
  for (int round = 0; round < 16; ++round) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      if (c.state == Connection::kDraining) continue;
      if (c.in.empty()) c.since = Clock::now();
      c.in.append(buffer, static_cast<size_t>(n));
      buffered_.fetch_add(n);
      // A limit is checked at least every 1 MiB: a body over it is never held whole.
      if (c.in.size() > (size_t{1} << 20) * (static_cast<size_t>(round) + 1)) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    const int fd = c.fd;  // the peer closed, or an error
    close(c);
    table_[static_cast<size_t>(fd)].reset();
    return;
  }
  if (c.state == Connection::kReading) advance(c);
  if (buffered_.load() > static_cast<int64_t>(limits_.max_buffered_bytes)) relieve();
}

void HttpEdge::advance(Connection& c) {
  const auto now = Clock::now();
  if (c.in.empty()) {
    c.deadline = c.since + edge_duration(limits_.idle_timeout_s);
    return;
  }
  if (!c.has_head) {
    const HeadScan scan = scan_head(c.in, limits_.head);
    if (scan.state == HeadScan::kRefused) return refuse(c, scan.status, scan.reason);
    if (scan.state == HeadScan::kIncomplete) {
      c.deadline = c.since + edge_duration(limits_.header_timeout_s);
      return;
    }
    c.has_head = true;
    c.head = scan.head;
    c.head_done = now;
    c.chunked = {};
    if (c.head.expect_continue) {
      // The edge answers Expect itself, so the library must not answer it again.
      c.in.erase(c.head.expect_begin, c.head.expect_end - c.head.expect_begin);
      buffered_.fetch_sub(static_cast<int64_t>(c.head.expect_end - c.head.expect_begin));
      c.head.head_bytes -= c.head.expect_end - c.head.expect_begin;
      const bool body_missing = c.head.framing == Framing::kChunked ||
                                (c.head.framing == Framing::kLength &&
                                 c.in.size() < c.head.head_bytes + c.head.content_length);
      if (body_missing) edge_write(c.fd, "HTTP/1.1 100 Continue\r\n\r\n", 1.0);
    }
  }
  size_t total = c.head.head_bytes;
  if (c.head.framing == Framing::kLength) {
    total += static_cast<size_t>(c.head.content_length);
  } else if (c.head.framing == Framing::kChunked) {
    const int r = scan_chunked(std::string_view(c.in).substr(c.head.head_bytes), c.chunked,
                               limits_.head);
    if (r > 1) {
      return refuse(c, r, r == 413 ? "the request body is over the limit of " +
                                         std::to_string(limits_.head.max_body_bytes) + " bytes"
                                   : "malformed chunked body");
    }
    total = r == 1 ? total + c.chunked.pos : c.in.size() + 1;
  }
  if (c.in.size() < total) {
    c.deadline = c.head_done + edge_duration(limits_.body_timeout_s);
    return;
  }
  c.request_bytes = total;
  c.state = Connection::kBusy;
  watch(c, false);
  Connection* held = table_[static_cast<size_t>(c.fd)].release();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(held);
  }
  ready_.notify_one();
}

void HttpEdge::refuse(Connection& c, int status, const std::string& reason) {
  const std::string body = refusal_ ? refusal_(status, reason) : reason;
  const std::string answer = "HTTP/1.1 " + std::to_string(status) + " " + edge_reason_phrase(status) +
                             "\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  [[maybe_unused]] const ssize_t n = ::send(c.fd, answer.data(), answer.size(), MSG_NOSIGNAL);
  ::shutdown(c.fd, SHUT_WR);
  buffered_.fetch_sub(static_cast<int64_t>(c.in.size()));
  std::string().swap(c.in);
  c.state = Connection::kDraining;
  c.deadline = Clock::now() + edge_duration(kEdgeDrainSeconds);
}

void HttpEdge::expire() {
  const auto now = Clock::now();
  for (auto& c : table_) {
    if (!c || now < c->deadline) continue;
    if (c->state == Connection::kReading && !c->in.empty()) {
      refuse(*c, 408, c->has_head ? "the request body did not arrive in time"
                                  : "the request head did not arrive in time");
    } else {
      close(*c);
      c.reset();
    }
  }
}

void HttpEdge::work() {
  while (true) {
    Connection* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return pool_stop_ || !requests_.empty(); });
      if (requests_.empty()) return;
      c = requests_.front();
      requests_.pop_front();
    }
    const bool last = stopping_.load() || ++c->answered >= limits_.max_requests_per_connection;
    bool keep = false;
    try {
      keep = handler_(c->fd, std::string_view(c->in).substr(0, c->request_bytes), last);
    } catch (const std::exception& e) {
      spdlog::error("unexpected error answering a request: {}", e.what());
    }
    if (!keep || last) {
      close(*c);
      delete c;
      continue;
    }
    c->in.erase(0, c->request_bytes);
    buffered_.fetch_sub(static_cast<int64_t>(c->request_bytes));
    // An idle connection does not keep the capacity of a large body.
    if (c->in.capacity() > (size_t{64} << 10) && c->in.size() < c->in.capacity() / 4) {
      c->in.shrink_to_fit();
    }
    c->has_head = false;
    c->request_bytes = 0;
    c->since = Clock::now();
    give_back(c);
  }
}

void HttpEdge::give_back(Connection* c) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    returned_.push_back(c);
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace tessera::serve
