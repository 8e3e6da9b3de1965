// serve's edge: the thin layer between accept() and cpp-httplib. One thread accepts connections and
// reads every request whole (head and body) without holding a worker; only a complete request that
// is within the limits (request_head.h) goes to a worker, which answers it and gives the connection
// back. So
//   - a slow or silent client holds a connection slot and a deadline, never a worker: the head must
//     arrive within `header_timeout_s` of its first byte and the body within `body_timeout_s` of
//     the head (408 otherwise), an idle keep-alive connection is closed after `idle_timeout_s`, and
//     at `max_connections` the connection that has waited longest for its request is dropped;
//   - a body is read only up to its limit (413 and close), a head up to its size and header count
//     (431), a Range header up to a few ranges (416), before anything allocates for them; what all
//     connections hold together is bounded too (503 for the largest);
//   - requests pipelined on one connection are answered one after another, in order.
// cpp-httplib 0.11.4 (Debian's, compiled) does none of these itself: it holds a thread per open
// connection, reads chunked bodies without a limit, and drops what its per-request read buffer held
// of the next requests.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stages/serve/request_head.h"

namespace tessera::serve {

struct EdgeLimits {
  HeadLimits head;
  double header_timeout_s = 10;  // from a request's first byte to the end of its head
  double body_timeout_s = 60;    // from the end of the head to the end of the body
  double idle_timeout_s = 5;     // a keep-alive connection waiting for its next request
  double write_timeout_s = 10;   // an answer not taken by the client within this is dropped
  int max_connections = 1000;
  int max_requests_per_connection = 1000;
  // Request bytes held across all connections: beyond, the connection holding the most is
  // refused (503), so partial bodies on many connections cannot add up to the machine's memory.
  size_t max_buffered_bytes = size_t{256} << 20;
};

// Writes all of `data` to the non-blocking socket `fd`, waiting at most `timeout_s` for it to take
// each part. False when the peer is gone or too slow. Thread-safe per descriptor owner.
bool edge_write(int fd, std::string_view data, double timeout_s);

class HttpEdge {
 public:
  // Answers one complete request (`request`: its head and body as received) on the socket `fd`
  // with edge_write; `last`: the connection is closed afterwards whatever the answer says (the
  // answer should say Connection: close). Returns whether the connection may stay open. Called on
  // worker threads, for one connection at a time.
  using Handler = std::function<bool(int fd, std::string_view request, bool last)>;
  // The body of an answer the edge gives itself (status 400, 408, 413, 414, 416, 431, 501), e.g.
  // the JSON error body; called on the edge's thread.
  using Refusal = std::function<std::string(int status, const std::string& reason)>;

  // Binds `host`:`port` (any free port for 0) and listens with the largest backlog the kernel
  // allows. Throws IoError naming the address when it cannot.
  HttpEdge(const std::string& host, int port, const EdgeLimits& limits, int workers,
           Handler handler, Refusal refusal);
  ~HttpEdge();  // stops
  HttpEdge(const HttpEdge&) = delete;
  HttpEdge& operator=(const HttpEdge&) = delete;

  int port() const { return port_; }
  // Starts the edge's thread and the workers.
  void start();
  // Stops accepting, lets workers finish the requests they hold, closes every connection. Safe to
  // call twice.
  void stop();

  struct Connection;

 private:
  void loop();
  void accept_all();
  void read_from(Connection& c);
  void advance(Connection& c);
  void refuse(Connection& c, int status, const std::string& reason);
  void close(Connection& c);
  void evict_one();
  void relieve();
  void expire();
  void work();
  void give_back(Connection* c);
  void watch(Connection& c, bool add);

  EdgeLimits limits_;
  Handler handler_;
  Refusal refusal_;
  int workers_;
  int port_ = 0;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
  std::atomic<int64_t> buffered_{0};  // the sum of the connections' unanswered input
  std::thread thread_;
  std::vector<std::thread> pool_;
  std::chrono::steady_clock::time_point accept_warned_;  // accept's last failure logged

  // Owned by the edge's thread: the connections not held by a worker, by descriptor.
  std::vector<std::unique_ptr<Connection>> table_;

  std::mutex mutex_;                    // guards the two queues
  std::condition_variable ready_;
  std::deque<Connection*> requests_;    // complete requests waiting for a worker
  std::deque<Connection*> returned_;    // answered, back to the edge's thread
  bool pool_stop_ = false;
};

}  // namespace tessera::serve
