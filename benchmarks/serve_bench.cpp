// serve_bench: the service against in-process search of the same queries, side by side in one run
// (docs/performance.md, "serve"). Per repetition:
//   inproc     the index loaded in this process (search::RankShards, one rank): each query searched
//              alone (latency p50/p99), and all of them in rounds of --clients (queries/s);
//   start      `serve` started on the index (one rank): seconds from exec to the first search
//              answered over HTTP;
//   one        one client, the same queries one after the other over loopback: round-trip p50/p99;
//   many       --clients clients at once, every query once: queries/s;
//   rss        serve's resident memory against the size of the shards' index files;
//   tiles      with --tile-index (an index whose slides are tiled JPEG TIFFs): every DeepZoom tile
//              of the top level of its first slide, each requested once (cold): p50.
// Ratios in "summary": one_p50 / inproc_p50, one_p99 / inproc_p99, many_qps / batched_qps.
// A plain process, not an MPI rank: serve runs as an MPI singleton.
//
//   serve_bench --index RUN/ingest/NAME [--tile-index RUN2/ingest/NAME] [--queries 1000]
//               [--clients 16] [--k 10] [--threads 2] [--repetitions 3] [--out FILE]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/vector/vector_index.h"
#include "stages/serve/deepzoom.h"
#include "common/search/rank_shards.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace tessera;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * (v.size() - 1) + 0.5)];
}

int64_t rss_bytes(int pid) {
  std::ifstream in(fmt::format("/proc/{}/statm", pid));
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

struct Running {
  pid_t pid = -1;
  int port = 0;
  double start_s = 0;  // exec to the first answered search
};

Running start_serve(const std::string& exe, const std::string& index, int threads,
                    const std::string& registry, const std::string& first_body) {
  fs::remove_all(registry);
  Running r;
  const auto t0 = Clock::now();
  r.pid = ::fork();
  if (r.pid == 0) {
    const std::string log = registry + ".log";
    const std::string command = fmt::format("exec {} --index {} --port 0 --threads {} --registry {} "
                                            "--poll 0 > {} 2>&1", exe, index, threads, registry, log);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string entry = registry + "/" + fs::path(index).filename().string() + ".json";
  while (r.port == 0) {
    if (auto j = read_json_file(entry)) r.port = j->at("port").get<int>();
    int status = 0;
    if (::waitpid(r.pid, &status, WNOHANG) == r.pid) fail<tessera::Error>("serve exited; see {}.log", registry);
    if (r.port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  httplib::Client c("127.0.0.1", r.port);
  while (true) {
    auto res = first_body.empty() ? c.Get("/healthz") : c.Post("/api/v1/search", first_body, "application/json");
    if (res && res->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.start_s = ms_since(t0) / 1000;
  return r;
}

void stop_serve(Running& r) {
  ::kill(r.pid, SIGTERM);
  int status = 0;
  ::waitpid(r.pid, &status, 0);
}

}  // namespace

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  po::options_description desc("serve_bench");
  desc.add_options()("help", "this help")
      ("index", po::value<std::string>()->required(), "RUN/ingest/NAME")
      ("tile-index", po::value<std::string>()->default_value(""), "an index of tiled JPEG slides")
      ("serve", po::value<std::string>()->default_value(""), "the serve executable")
      ("queries", po::value<int>()->default_value(1000), "query vectors")
      ("clients", po::value<int>()->default_value(16), "concurrent clients")
      ("k", po::value<int>()->default_value(10), "neighbours per query")
      ("threads", po::value<int>()->default_value(2), "search threads (in process and serve)")
      ("repetitions", po::value<int>()->default_value(3), "timed repetitions")
      ("scratch", po::value<std::string>()->default_value("bench-out/serve"), "work folder")
      ("out", po::value<std::string>()->default_value(""), "JSON report");
  po::variables_map v;
  po::store(po::parse_command_line(argc, argv, desc), v);
  if (v.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(v);
  const std::string index = fs::canonical(v["index"].as<std::string>()).string();
  std::string exe = v["serve"].as<std::string>();
  if (exe.empty()) exe = (fs::canonical("/proc/self/exe").parent_path().parent_path() / "stages/serve/serve").string();
  const int Q = v["queries"].as<int>(), clients = v["clients"].as<int>(), k = v["k"].as<int>();
  const int threads = v["threads"].as<int>();
  const std::string scratch = fs::absolute(v["scratch"].as<std::string>()).string();
  fs::create_directories(scratch);

  const Catalog catalog = load_catalog(index);
  int64_t index_bytes = 0;
  for (const auto& shard : catalog.shards) {
    for (const auto& s : shard.segments) index_bytes += static_cast<int64_t>(fs::file_size(catalog.path(s.index.file)));
  }
  // Unit-length Gaussian query vectors, a pure function of the seed.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<search::SearchJob> jobs(Q);
  std::vector<std::string> bodies(Q);
  for (int q = 0; q < Q; ++q) {
    jobs[q].vector.resize(catalog.dim);
    for (float& x : jobs[q].vector) x = normal(rng);
    l2_normalize(jobs[q].vector.data(), 1, catalog.dim);
    jobs[q].k = k;
    bodies[q] = json{{"vector", jobs[q].vector}, {"k", k}}.dump();
  }

  json reps = json::array();
  // The report is rewritten after every repetition, so that a run cut short keeps what it measured.
  json report;
  auto save = [&] {
    report = {{"benchmark", "serve_bench"},
                         {"parameters", {{"index", index}, {"index_spec", catalog.index_spec}, {"rows", catalog.rows()},
                                         {"dimension", catalog.dim}, {"shards", catalog.shards.size()},
                                         {"queries", Q}, {"clients", clients}, {"k", k}, {"threads", threads},
                                         {"ranks", 1}}},
                         {"machine", bench::machine_info()},
                         {"versions", bench::versions({{"cpp-httplib", CPPHTTPLIB_VERSION}})},
                         {"command", bench::command_line(argc, argv)},
                         {"repetitions", reps},
                         {"summary", bench::summarize_repetitions(reps)}};
    const std::string out = v["out"].as<std::string>().empty() ? scratch + "/serve_bench.json" : v["out"].as<std::string>();
    std::ofstream(out) << report.dump(2) << "\n";
  };
  for (int rep = 0; rep < v["repetitions"].as<int>(); ++rep) {
    json r;
    {
      set_vector_threads(threads);
      search::RankShards shards(index, 0, 1, true, VerifyLevel::kCheap);
      shards.search({jobs[0]}, threads);  // warm-up
      std::vector<double> single;
      for (const auto& job : jobs) {
        const auto t0 = Clock::now();
        shards.search({job}, threads);
        single.push_back(ms_since(t0));
      }
      const auto t0 = Clock::now();
      for (int q = 0; q < Q; q += clients) {
        shards.search(std::vector<search::SearchJob>(jobs.begin() + q, jobs.begin() + std::min(Q, q + clients)), threads);
      }
      r["inproc"] = {{"p50_ms", percentile(single, 0.5)}, {"p99_ms", percentile(single, 0.99)},
                     {"batched_qps", Q / (ms_since(t0) / 1000)}};
    }
    Running s = start_serve(exe, index, threads, scratch + "/registry", bodies[0]);
    r["start_s"] = s.start_s;
    {
      httplib::Client c("127.0.0.1", s.port);
      c.set_read_timeout(120);
      c.set_tcp_nodelay(true);
      std::vector<double> one;
      for (const auto& b : bodies) {
        const auto t0 = Clock::now();
        auto res = c.Post("/api/v1/search", b, "application/json");
        if (!res || res->status != 200) fail<tessera::Error>("a search failed");
        one.push_back(ms_since(t0));
      }
      r["one"] = {{"p50_ms", percentile(one, 0.5)}, {"p99_ms", percentile(one, 0.99)}};
    }
    {
      std::atomic<int> next{0}, failed{0};
      std::mutex failures_mutex;
      std::map<std::string, int> failures;  // "HTTP <status>" or the client's error, and how often
      std::vector<double> many_ms;           // every request's round trip
      const auto t0 = Clock::now();
      std::vector<std::thread> pool;
      for (int c = 0; c < clients; ++c) {
        pool.emplace_back([&] {
          httplib::Client cli("127.0.0.1", s.port);
          cli.set_tcp_nodelay(true);
          cli.set_read_timeout(120);  // slow is measured, not failed (serve's own limit: 30 s)
          for (int q; (q = next++) < Q;) {
            const auto t1 = Clock::now();
            auto res = cli.Post("/api/v1/search", bodies[q], "application/json");
            const double ms = ms_since(t1);
            {
              std::lock_guard lock(failures_mutex);
              many_ms.push_back(ms);
            }
            if (res && res->status == 200) continue;
            ++failed;
            const std::string why = res ? fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 200))
                                        : httplib::to_string(res.error());
            std::lock_guard lock(failures_mutex);
            ++failures[why];
          }
        });
      }
      for (auto& t : pool) t.join();
      json why_failed = json::array();  // an array: the summary leaves it out
      for (const auto& [why, count] : failures) why_failed.push_back({{"why", why}, {"count", count}});
      r["many"] = {{"qps", Q / (ms_since(t0) / 1000)}, {"failed", failed.load()}, {"failures", why_failed},
                   {"p50_ms", percentile(many_ms, 0.5)}, {"p99_ms", percentile(many_ms, 0.99)},
                   {"max_ms", percentile(many_ms, 1.0)}};
    }
    r["rss"] = {{"serve_rss_mb", rss_bytes(s.pid) / 1048576.0}, {"index_files_mb", index_bytes / 1048576.0}};
    stop_serve(s);
    r["ratios"] = {{"one_p50_over_inproc_p50", r["one"]["p50_ms"].get<double>() / r["inproc"]["p50_ms"].get<double>()},
                   {"one_p99_over_inproc_p99", r["one"]["p99_ms"].get<double>() / r["inproc"]["p99_ms"].get<double>()},
                   {"many_qps_over_batched_qps", r["many"]["qps"].get<double>() / r["inproc"]["batched_qps"].get<double>()},
                   {"rss_minus_index_mb", r["rss"]["serve_rss_mb"].get<double>() - r["rss"]["index_files_mb"].get<double>()}};
    if (!v["tile-index"].as<std::string>().empty()) {
      // Every tile of the top level of the first slide, each once (nothing cached yet).
      const std::string tiles = fs::canonical(v["tile-index"].as<std::string>()).string();
      Running t = start_serve(exe, tiles, threads, scratch + "/registry-tiles", "");
      httplib::Client c("127.0.0.1", t.port);
      c.set_read_timeout(120);
      c.set_tcp_nodelay(true);
      const std::string slide = json::parse(c.Get("/api/v1/slides")->body).at("slides").at(0).at("slide_id");
      const auto dzi = c.Get(("/api/v1/slides/" + slide + ".dzi").c_str());
      const json size = json::parse(dzi->get_header_value("X-Slide-Size"));
      const serve::DeepZoom zoom(size.at("width").get<int64_t>(), size.at("height").get<int64_t>());
      const int level = zoom.max_level();
      std::vector<double> tile_ms;
      for (int64_t row = 0; row < zoom.rows(level); ++row) {
        for (int64_t col = 0; col < zoom.columns(level); ++col) {
          const auto t0 = Clock::now();
          auto res = c.Get(fmt::format("/api/v1/slides/{}_files/{}/{}_{}.jpeg", slide, level, col, row).c_str());
          if (!res || res->status != 200) fail<tessera::Error>("a tile failed");
          tile_ms.push_back(ms_since(t0));
        }
      }
      r["tiles"] = {{"slide", slide}, {"width", size["width"]}, {"height", size["height"]},
                    {"count", tile_ms.size()}, {"p50_ms", percentile(tile_ms, 0.5)},
                    {"p99_ms", percentile(tile_ms, 0.99)}};
      stop_serve(t);
    }
    r["load_average"] = bench::load_average();
    std::cerr << r.dump() << "\n";
    reps.push_back(r);
    save();
  }
  std::cout << report["summary"].dump(2) << "\n";
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "serve_bench: " << e.what() << "\n";
    return 2;
  }
}
