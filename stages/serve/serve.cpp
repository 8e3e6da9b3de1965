#include "stages/serve/serve.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/vector/vector_index.h"
#include "stages/serve/api.h"
#include "stages/serve/batcher.h"
#include "stages/serve/generation_view.h"
#include "stages/serve/http_server.h"
#include "stages/serve/metrics.h"
#include "stages/serve/registry.h"
#include "common/search/rank_shards.h"
#include "stages/serve/slide_indexes.h"

#ifndef TESSERA_SERVE_WEB_DIR
#define TESSERA_SERVE_WEB_DIR ""
#endif

namespace tessera::serve {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using search::RankShards;
using search::search_round;

namespace {

Controls* g_controls = nullptr;

extern "C" void on_signal(int signal) {
  if (!g_controls) return;
  if (signal == SIGHUP) {
    g_controls->reload.store(true);
  } else {
    g_controls->stop_signal.store(signal);
    g_controls->stop.store(true);
  }
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail<InvalidInput>("cannot read the token file '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(0, 1);
  if (token.size() < 16) {
    fail<InvalidInput>("the token in '{}' is {} characters long: give at least 16", path, token.size());
  }
  return token;
}

// What tells a new generation apart: catalog.json's modification time and size (ingest replaces
// the file by a rename when a generation is complete).
std::string catalog_stamp(const std::string& index) {
  std::error_code ec;
  const fs::path p = fs::path(index) / kCatalogFile;
  const auto time = fs::last_write_time(p, ec);
  if (ec) return "";
  const auto size = fs::file_size(p, ec);
  return fmt::format("{}:{}", time.time_since_epoch().count(), ec ? 0 : size);
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Every rank loads the index again into `next`; kept only when every rank loaded it (collective).
bool load_next(const Config& config, Comm& comm, std::unique_ptr<RankShards>& next) {
  try {
    agree_on_failure(comm, [&] {
      next = std::make_unique<RankShards>(config.index, comm.rank(), comm.size(), config.mmap,
                                          config.verify, config.rerank);
    });
  } catch (const Error& e) {
    spdlog::warn("reload of '{}' failed: {}", config.index, e.what());
    next.reset();
  }
  return next != nullptr;
}

// Answers every job of a round, collectively; on rank 0 (`batcher` not null) each pending search
// gets its hits or the round's error.
void search(Comm& comm, RankShards& shards, const std::vector<SearchJob>& jobs, int threads,
            std::vector<Batcher::Pending>& pending, Batcher* batcher, Metrics* metrics) {
  const auto start = Clock::now();
  try {
    std::vector<std::vector<search::Hit>> hits = search_round(comm, shards, jobs, threads);
    if (batcher) batcher->answer(pending, std::move(hits));
  } catch (const std::exception& e) {
    // Every rank sees the same failure (search_round); rank 0 answers it, the others go on.
    if (batcher) {
      batcher->answer_with_error(pending, std::current_exception());
    } else {
      spdlog::debug("round failed: {}", e.what());
    }
  }
  if (metrics) metrics->batch(jobs.size(), std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace

void install_signal_handlers(Controls& controls) {
  g_controls = &controls;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaction(s, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void bound_finalize(const Controls& controls, int code) {
  if (controls.stop_signal.load() == 0) return;
  std::thread([code] {
    std::this_thread::sleep_for(kFinalizeBound);
    spdlog::info("MPI_Finalize did not return within {} ms: the launcher is ending the job; exit {}",
                 kFinalizeBound.count(), code);
    spdlog::default_logger()->flush();
    std::_Exit(code);
  }).detach();
}

int run(const Config& config, Comm& comm, Controls& controls) {
  const int threads = thread_count(config.threads, "--threads");
  set_vector_threads(threads);
  const auto start = Clock::now();
  auto shards = std::make_unique<RankShards>(config.index, comm.rank(), comm.size(), config.mmap,
                                             config.verify, config.rerank);
  const int64_t rows = comm.allreduce_sum(shards->rows());

  // Rank 0 sets up the HTTP side; a failure there (port in use, no token) ends every rank.
  Batcher batcher;
  Metrics metrics;
  std::unique_ptr<Api> api;
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<Registration> registration;
  std::shared_ptr<const GenerationView> front;  // rank 0: the generation requests get
  decided_by_root(comm, [&] {
    const std::string token = config.token_file.empty() ? "" : read_token(config.token_file);
    std::map<std::string, std::string> files;
    const std::string web = config.web_dir.empty() ? TESSERA_SERVE_WEB_DIR : config.web_dir;
    try {
      files = Api::load_files(web);
    } catch (const Error& e) {
      // A page folder the user named and that cannot be served is bad input (exit 2).
      if (!config.web_dir.empty()) fail<InvalidInput>("invalid --web-dir: {}", e.what());
      spdlog::warn("no web page: {}; the API is served alone", e.what());
    }
    front = std::make_shared<const GenerationView>(shards->catalog(), shards->slides(), rows, 0);
    auto slide_indexes = std::make_shared<const SlideIndexes>(
        SlideIndexes::load(config.slide_index, shards->catalog()));
    api = std::make_unique<Api>(front, batcher, metrics, config, std::move(files), token,
                                comm.size(), std::move(slide_indexes));
    server = std::make_unique<HttpServer>(*api, config);
    return std::string();
  });

  if (comm.rank() == 0) {
    const std::string url = fmt::format("http://{}:{}/", config.bind, server->port());
    const std::string name = fs::path(fs::weakly_canonical(fs::absolute(config.index))).filename().string();
    const std::string dir =
        config.registry_dir.empty() ? default_registry_dir(config.index) : config.registry_dir;
    try {
      registration = std::make_unique<Registration>(
          dir, name,
          nlohmann::json{{"index", fs::weakly_canonical(fs::absolute(config.index)).string()},
                         {"host", hostname()},
                         {"bind", config.bind},
                         {"port", server->port()},
                         {"url", url},
                         {"pid", ::getpid()},
                         {"ranks", comm.size()},
                         {"token", !config.token_file.empty()}});
    } catch (const std::exception& e) {
      spdlog::warn("cannot register the service in '{}' (tessera-status will not list it): {}", dir,
                   e.what());
    }
    server->start();
    spdlog::info("serving {} vectors of '{}' ({} shard(s) over {} rank(s), loaded in {:.2f} s) at {}",
                 rows, config.index, shards->catalog().shards.size(), comm.size(),
                 std::chrono::duration<double>(Clock::now() - start).count(), url);
  }

  // A generation is swapped in in three steps, so that every search is answered by the generation
  // its request resolved the query against (the one its answer names, stamped on its jobs): every
  // rank loads it into `next` beside `shards` (a kReload command); rank 0 then hands it to new
  // requests (a new GenerationView), and its rounds search `next` (kSearchNext) while the old
  // generation's rounds still search `shards`; once no request holds the old GenerationView and
  // none of its searches is queued, the next kReload swaps `next` in and releases the old shards.
  std::unique_ptr<RankShards> next;
  std::shared_ptr<const GenerationView> next_front;  // rank 0: `next`'s, until the flip
  // rank 0: after the flip, the generation being left.
  std::weak_ptr<const GenerationView> old_front;
  int active = 0;        // rank 0: the generation `shards` holds
  bool flipped = false;  // rank 0: requests get `next`'s generation
  std::string stamp = comm.rank() == 0 ? catalog_stamp(config.index) : "";
  auto polled = Clock::now();
  const auto tick = std::chrono::duration<double>(config.tick_ms / 1000.0);
  const auto idle = std::chrono::milliseconds(100);
  while (true) {
    Command command;
    std::vector<Batcher::Pending> pending;
    if (comm.rank() == 0) {
      // On a stop, searches already submitted are answered (by their own generation) and later
      // ones refused, so that every rank leaves within the grace Open MPI gives after SIGTERM.
      const bool stopping = controls.stop.load();
      if (stopping) batcher.refuse();
      bool due = false;
      if (!next && config.poll_s > 0 &&
          Clock::now() - polled > std::chrono::duration<double>(config.poll_s)) {
        polled = Clock::now();
        due = catalog_stamp(config.index) != stamp;
      }
      if (next && !flipped && !stopping) {
        batcher.set_generation(active + 1);
        api->set_front(next_front);
        old_front = front;
        front = std::move(next_front);
        flipped = true;
      }
      if (next && flipped && old_front.expired() && batcher.queued(active) == 0 &&
          !(stopping && batcher.queued() == 0)) {
        command.kind = CommandKind::kReload;  // the swap
      } else if (stopping && batcher.queued() == 0) {
        command.kind = CommandKind::kStop;
      } else if (!next && !stopping && (controls.reload.exchange(false) || due)) {
        command.kind = CommandKind::kReload;  // the load
      } else {
        // A search of a generation no longer resident (none is expected: the old shards stay
        // while a request holds the old GenerationView) is refused (503), never answered from
        // another.
        batcher.fail_older(active);
        pending = batcher.take(idle, tick, static_cast<size_t>(config.limits.max_batch));
        if (pending.empty()) continue;
        const int generation = pending.front().generation;
        if (generation != active && !(flipped && generation == active + 1)) {
          batcher.answer_with_error(pending, std::make_exception_ptr(Error(fmt::format(
                                                 "generation {} of the index is not served",
                                                 generation))));
          continue;
        }
        command.kind = generation == active ? CommandKind::kSearch : CommandKind::kSearchNext;
        for (auto& p : pending) command.jobs.push_back(p.job);
      }
      if (comm.size() > 1) comm.broadcast(encode_command(command), 0);
    } else {
      command = decode_command(comm.broadcast(std::string(), 0));
    }
    if (command.kind == CommandKind::kStop) break;
    if (command.kind == CommandKind::kReload && next) {
      shards.swap(next);
      next.reset();
      if (comm.rank() == 0) {
        active = front->generation();
        flipped = false;
        spdlog::info("now serving {} vectors of generation(s) 0..{} of '{}' (service generation "
                     "{})", front->rows(), shards->catalog().generations.size() - 1, config.index,
                     active);
      }
      continue;
    }
    if (command.kind == CommandKind::kReload) {
      const std::string next_stamp = comm.rank() == 0 ? catalog_stamp(config.index) : "";
      if (load_next(config, comm, next)) {
        const int64_t next_rows = comm.allreduce_sum(next->rows());
        if (comm.rank() == 0) {
          next_front = std::make_shared<const GenerationView>(next->catalog(), next->slides(),
                                                              next_rows, active + 1);
        }
      }
      stamp = next_stamp;
      continue;
    }
    TESSERA_CHECK(command.kind == CommandKind::kSearch || next,
                  "serve: a round of the next generation, which this rank has not loaded");
    search(comm, command.kind == CommandKind::kSearch ? *shards : *next, command.jobs, threads,
           pending, comm.rank() == 0 ? &batcher : nullptr, comm.rank() == 0 ? &metrics : nullptr);
  }
  if (comm.rank() == 0) {
    spdlog::info("stopping");
    registration.reset();  // first: a slow client may hold a worker while the server stops
    server->stop();
    batcher.close();
  }
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace tessera::serve
