// http_choice_bench: the measurement behind serve's HTTP library (docs/architecture.md, "serve").
// Two servers in this process answer GET /x with the same 2 KiB JSON body: cpp-httplib (its thread
// pool, as serve runs it) and Boost.Beast (asynchronous sessions on an io_context). For each, in
// alternation per repetition:
//   load      C keep-alive clients (cpp-httplib's client, one thread each) send N requests each:
//             round-trip latency p50/p99 and requests/s;
//   stalled   S connections that send half a request line and stall, then one fresh client asks:
//             the latency of its answer (the server's exposure to slow or idle clients).
//
//   http_choice_bench [--clients 16] [--requests 2000] [--stalled 32] [--repetitions 3]
//                     [--httplib-threads 16] [--beast-threads 2] [--out FILE]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/program_options.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "benchmarks/bench_report.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::string& body) : stream_(std::move(socket)), body_(body) {}
  void read() {
    request_ = {};
    stream_.expires_after(std::chrono::seconds(5));
    http::async_read(stream_, buffer_, request_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

 private:
  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
    auto response = std::make_shared<http::response<http::string_body>>(http::status::ok, request_.version());
    response->set(http::field::content_type, "application/json");
    response->keep_alive(request_.keep_alive());
    response->body() = body_;
    response->prepare_payload();
    http::async_write(stream_, *response, [self = shared_from_this(), response](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (!response->keep_alive()) {
        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        return;
      }
      self->read();
    });
  }
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  const std::string& body_;
};

class BeastServer {
 public:
  BeastServer(int threads, const std::string& body) : body_(body), acceptor_(ioc_) {
    const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    accept();
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { ioc_.run(); });
  }
  ~BeastServer() {
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }

 private:
  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(std::move(socket), body_)->read();
      accept();
    });
  }
  const std::string& body_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
};

class HttplibServer {
 public:
  HttplibServer(int threads, const std::string& body) {
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_read_timeout(std::chrono::seconds(5));
    // Without it the library writes headers and body apart and Nagle's algorithm holds the body
    // for the client's delayed ACK (about 40 ms per request); serve sets it too.
    server_.set_tcp_nodelay(true);
    server_.Get("/x", [&body](const httplib::Request&, httplib::Response& r) { r.set_content(body, "application/json"); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttplibServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * (v.size() - 1))];
}

json load(int port, int clients, int requests) {
  std::vector<std::vector<double>> latency(clients);
  std::atomic<int> failed{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (int i = 0; i < requests; ++i) {
        const auto t0 = Clock::now();
        auto r = client.Get("/x");
        if (!r || r->status != 200) ++failed;
        latency[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latency) all.insert(all.end(), l.begin(), l.end());
  return {{"requests_per_s", all.size() / seconds}, {"p50_ms", percentile(all, 0.5)},
          {"p99_ms", percentile(all, 0.99)}, {"failed", failed.load()}};
}

// The latency of one request while `stalled` connections hold half a request line each.
double stalled(int port, int connections) {
  std::vector<int> fds;
  for (int i = 0; i < connections; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const char partial[] = "GET /x HTTP/1.1\r\nHost: a\r\n";
      (void)!::write(fd, partial, sizeof partial - 1);
    }
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(30));
  const auto t0 = Clock::now();
  auto r = client.Get("/x");
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  for (int fd : fds) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return r && r->status == 200 ? ms : -1;
}

}  // namespace

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  po::options_description desc("http_choice_bench");
  desc.add_options()("help", "this help")
      ("clients", po::value<int>()->default_value(16), "keep-alive clients")
      ("requests", po::value<int>()->default_value(2000), "requests per client")
      ("stalled", po::value<int>()->default_value(32), "stalled connections")
      ("repetitions", po::value<int>()->default_value(3), "repetitions")
      ("httplib-threads", po::value<int>()->default_value(16), "cpp-httplib pool threads")
      ("beast-threads", po::value<int>()->default_value(2), "Beast io_context threads")
      ("out", po::value<std::string>()->default_value(""), "JSON report (default: stdout)");
  po::variables_map v;
  po::store(po::parse_command_line(argc, argv, desc), v);
  if (v.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(v);
  const int clients = v["clients"].as<int>(), requests = v["requests"].as<int>();
  std::string body = "{\"hits\": [";
  while (body.size() < 2048) body += "{\"patch_id\": 4294967296, \"score\": 0.987654},";
  body.back() = ']';
  body += "}";
  json reps = json::array();
  for (int r = 0; r < v["repetitions"].as<int>(); ++r) {
    json rep;
    {
      HttplibServer s(v["httplib-threads"].as<int>(), body);
      load(s.port(), clients, 200);  // warm-up
      rep["httplib"] = load(s.port(), clients, requests);
      rep["httplib"]["stalled_request_ms"] = stalled(s.port(), v["stalled"].as<int>());
    }
    {
      BeastServer s(v["beast-threads"].as<int>(), body);
      load(s.port(), clients, 200);
      rep["beast"] = load(s.port(), clients, requests);
      rep["beast"]["stalled_request_ms"] = stalled(s.port(), v["stalled"].as<int>());
    }
    rep["load_average"] = tessera::bench::load_average();
    reps.push_back(rep);
    std::cerr << rep.dump() << "\n";
  }
  const json report = {
      {"benchmark", "http_choice_bench"},
      {"parameters", {{"clients", clients}, {"requests_per_client", requests}, {"body_bytes", body.size()},
                      {"stalled_connections", v["stalled"].as<int>()},
                      {"httplib_threads", v["httplib-threads"].as<int>()},
                      {"beast_threads", v["beast-threads"].as<int>()},
                      {"httplib_read_timeout_s", 5}, {"beast_read_timeout_s", 5}}},
      {"machine", tessera::bench::machine_info()},
      {"versions", tessera::bench::versions({{"cpp-httplib", CPPHTTPLIB_VERSION},
                                             {"boost", BOOST_LIB_VERSION}})},
      {"command", tessera::bench::command_line(argc, argv)},
      {"repetitions", reps},
      {"summary", tessera::bench::summarize_repetitions(reps)}};
  const std::string out = v["out"].as<std::string>();
  if (out.empty()) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::ofstream(out) << report.dump(2) << "\n";
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "http_choice_bench: " << e.what() << "\n";
    return 2;
  }
}
