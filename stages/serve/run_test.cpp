// serve::run at R = 1..3 ranks as threads over one ingest output of 3 shards: rank 0 answers HTTP,
// searches go through the ranks' collective rounds, the hits do not depend on R (a rank without
// shards included), a stop ends every rank with 0, and a missing shard ends every rank alike;
// under load, an appended generation is swapped in with every answer from the generation it names,
// and a stop answers the searches in flight.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "stages/serve/config.h"
#include "stages/serve/serve.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

using nlohmann::json;

class ServeRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_serve");
    make_upstream(dir_->path().string(), run_dir(), true);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  static serve::Config config(const std::string& index, const std::string& registry) {
    return stage_config(serve::option_table(),
                        {"--index", index, "--port", "0", "--registry", registry, "--poll", "0",
                         "--threads", "1", "--http-threads", "4"},
                        serve::config_from);
  }
  static std::vector<int64_t> some_patches() { return every_third_patch(run_dir()); }

  static ScratchDir* dir_;
};

ScratchDir* ServeRun::dir_ = nullptr;

// The service of one job: R rank threads running serve::run, stopped through its Controls.
class Job {
 public:
  Job(int ranks, serve::Config config) : config_(std::move(config)) {
    thread_ = std::thread([this, ranks] {
      outcomes_ = run_stage_ranks_with(ranks);
    });
  }
  ~Job() { stop(); }
  // The port rank 0 listens on, from its registration; nullopt when the job ended first.
  std::optional<int> port(const std::string& registry, const std::string& name) {
    const std::string entry = registry + "/" + name + ".json";
    for (int i = 0; i < 1200; ++i) {
      if (auto j = read_json_file(entry)) return j->at("port").get<int>();
      if (ended_) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }
  void reload() { controls_.reload.store(true); }
  const std::vector<RankOutcome>& stop() {
    controls_.stop.store(true);
    if (thread_.joinable()) thread_.join();
    return outcomes_;
  }

 private:
  std::vector<RankOutcome> run_stage_ranks_with(int ranks) {
    auto outcomes = run_rank_outcomes(ranks, [this](Comm& comm) {
      return serve::run(config_, comm, controls_);
    });
    ended_ = true;
    return outcomes;
  }

  serve::Config config_;
  serve::Controls controls_;
  std::atomic<bool> ended_{false};
  std::vector<RankOutcome> outcomes_;
  std::thread thread_;
};

TEST_F(ServeRun, HitsDoNotDependOnTheNumberOfRanks) {
  const std::vector<int64_t> patches = some_patches();
  std::vector<json> first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string registry = *dir_ / fmt::format("registry-r{}", ranks);
    Job job(ranks, config(run_dir() + "/ingest/flat", registry));
    const std::optional<int> port = job.port(registry, "flat");
    ASSERT_TRUE(port.has_value()) << describe(job.stop());
    httplib::Client client("127.0.0.1", *port);
    client.set_read_timeout(120);
    std::vector<json> hits;
    for (const int64_t patch : patches) {
      auto res = client.Post("/api/v1/search", json{{"patch_id", patch}, {"k", 5}}.dump(),
                             "application/json");
      ASSERT_TRUE(res) << httplib::to_string(res.error());
      ASSERT_EQ(res->status, 200) << res->body;
      json answer = json::parse(res->body).at("hits");
      ASSERT_EQ(answer.size(), 5u) << res->body;
      EXPECT_EQ(answer.at(0).at("patch_id").get<int64_t>(), patch) << "R = " << ranks;
      hits.push_back(std::move(answer));
    }
    const auto outcomes = job.stop();
    EXPECT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    if (ranks == 1) {
      first = hits;
      continue;
    }
    ASSERT_EQ(hits.size(), first.size());
    for (size_t q = 0; q < hits.size(); ++q) {
      for (size_t h = 0; h < hits[q].size(); ++h) {
        EXPECT_EQ(hits[q][h].at("patch_id"), first[q][h].at("patch_id")) << "R = " << ranks;
        EXPECT_FLOAT_EQ(hits[q][h].at("score").get<float>(), first[q][h].at("score").get<float>())
            << "R = " << ranks;
      }
    }
  }
}

// A shard file gone: the rank that loads it fails with an IoError naming it, the others are
// released with its exit code, and no service is left running.
TEST_F(ServeRun, AMissingShardFailsItsRankAndEndsTheOthers) {
  const std::string copy = *dir_ / "missing";
  fs::create_directories(copy);
  for (const char* stage : {"patchgen", "embed", "ingest"}) {
    fs::copy(run_dir() + "/" + stage, copy + "/" + stage, fs::copy_options::recursive);
  }
  const std::string gone = copy + "/ingest/flat/gen-00000/shards/shard-00002/index.faiss";
  ASSERT_TRUE(fs::remove(gone));
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string registry = *dir_ / fmt::format("missing-registry-r{}", ranks);
    Job job(ranks, config(copy + "/ingest/flat", registry));
    EXPECT_FALSE(job.port(registry, "flat").has_value()) << "a service with a missing shard";
    const auto outcomes = job.stop();
    for (const auto& o : outcomes) EXPECT_NE(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(describe(outcomes).find("shard-00002"), std::string::npos) << describe(outcomes);
  }
}

// The slide ids with patches in the generation the service answers now, and that generation.
std::pair<std::set<std::string>, int> served_slides(httplib::Client& client) {
  const auto generation = [&client] {
    const auto info = client.Get("/api/v1/info");
    return info ? json::parse(info->body).at("service_generation").get<int>() : -1;
  };
  while (true) {
    const int before = generation();
    const auto slides = client.Get("/api/v1/slides");
    if (before < 0 || !slides) return {{}, -1};
    if (generation() != before) continue;  // swapped in between
    std::set<std::string> ids;
    const json table = json::parse(slides->body);
    for (const json& s : table.at("slides")) {
      if (s.at("patches").get<int64_t>() > 0) ids.insert(s.at("slide_id").get<std::string>());
    }
    return {ids, before};
  }
}

// Searches from a few clients until `done`: each answer's generation and the slides of its hits.
class SearchLoad {
 public:
  SearchLoad(int port, std::vector<int64_t> patches, int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, port, patches, c] {
        httplib::Client client("127.0.0.1", port);
        client.set_read_timeout(120);
        for (size_t i = c; !done_; ++i) {
          const int64_t patch = patches[i % patches.size()];
          auto res = client.Post("/api/v1/search", json{{"patch_id", patch}, {"k", 40}}.dump(),
                                 "application/json");
          std::lock_guard<std::mutex> lock(mutex_);
          if (!res) {
            problems_.push_back(httplib::to_string(res.error()));
            continue;
          }
          if (res->status != 200) {
            statuses_.push_back(res->status);
            refusals_.push_back(res->body);
            continue;
          }
          const json answer = json::parse(res->body);  // kept: the loop below refers into it
          std::set<std::string> slides;
          for (const json& h : answer.at("hits")) {
            slides.insert(h.at("slide_id").get<std::string>());
          }
          answers_.emplace_back(answer.at("generation").get<int>(), std::move(slides));
        }
      });
    }
  }
  ~SearchLoad() { finish(); }
  void finish() {
    done_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  size_t answered() {
    std::lock_guard<std::mutex> lock(mutex_);
    return answers_.size();
  }
  std::vector<std::pair<int, std::set<std::string>>> answers_;
  std::vector<int> statuses_;
  std::vector<std::string> refusals_;  // their bodies
  std::vector<std::string> problems_;

 private:
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

// Issue 30, item 1: answers labelled generation 0 held hits of slides that exist only in
// generation 1 (the searches queued while the new generation loaded were answered by it). Part 1
// of a two-part cohort is appended while clients search; every answer names one generation and
// holds only its slides.
TEST_F(ServeRun, EveryAnswerDuringAReloadComesFromTheGenerationItNames) {
  const std::string run = *dir_ / "parts";
  SerialComm serial;
  for (int part = 0; part < 2; ++part) {
    const std::string p = std::to_string(part);
    ASSERT_EQ(patchgen::run(stage_config(patchgen::option_table(),
                                         {"--manifest", *dir_ / "m.csv", "--out", run,
                                          "--patch-size", "64", "--file-locking", "false",
                                          "--reader-threads", "1", "--qc", "false", "--part", p,
                                          "--parts", "2"},
                                         patchgen::config_from),
                            serial), 0);
    ASSERT_EQ(embed::run(stage_config(embed::option_table(),
                                      {"--run", run, "--model", "vit-tiny", "--batch-size", "8",
                                       "--torch-threads", "1", "--file-locking", "false",
                                       "--deterministic", "--part", p, "--parts", "2"},
                                      embed::config_from),
                         serial), 0);
  }
  std::vector<int64_t> patches;  // of part 0's slides, in both generations
  const IndexInfo part0 = load_index_info(run + "/patchgen/part-00000-of-00002");
  const IndexRows rows = IndexReader(part0.path).read_range(0, part0.rows);
  for (size_t i = 0; i < rows.size(); i += 5) patches.push_back(rows.patch_id[i]);
  for (int ranks = 1; ranks <= 2; ++ranks) {
    const std::string name = fmt::format("grown-r{}", ranks);
    ASSERT_EQ(ingest::run(ingest_config(run, name, {"--shards", "2", "--embed-parts", "0"}), serial),
              0);
    const std::string registry = *dir_ / fmt::format("grown-registry-r{}", ranks);
    Job job(ranks, config(run + "/ingest/" + name, registry));
    const std::optional<int> port = job.port(registry, name);
    ASSERT_TRUE(port.has_value()) << describe(job.stop());
    httplib::Client client("127.0.0.1", *port);
    const auto [slides0, g0] = served_slides(client);
    ASSERT_EQ(g0, 0);
    SearchLoad load(*port, patches, 4);
    ASSERT_EQ(ingest::run(ingest_config(run, name, {"--shards", "2", "--append"}), serial), 0);
    job.reload();
    std::set<std::string> slides1;
    for (int i = 0; i < 600; ++i) {
      auto [ids, g] = served_slides(client);
      if (g == 1) {
        slides1 = std::move(ids);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const size_t swapped = load.answered();
    for (int i = 0; i < 500 && load.answered() < swapped + 8; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    load.finish();
    ASSERT_GT(slides1.size(), slides0.size()) << "R = " << ranks << ": generation 1 never served";
    EXPECT_TRUE(load.problems_.empty()) << load.problems_.front();
    EXPECT_TRUE(load.statuses_.empty()) << "R = " << ranks << ": status " << load.statuses_.front();
    int with_new = 0;
    for (const auto& [generation, hit_slides] : load.answers_) {
      ASSERT_TRUE(generation == 0 || generation == 1) << generation;
      const std::set<std::string>& allowed = generation == 0 ? slides0 : slides1;
      for (const std::string& s : hit_slides) {
        EXPECT_EQ(allowed.count(s), 1u)
            << "R = " << ranks << ": an answer of generation " << generation << " holds slide "
            << s;
      }
      for (const std::string& s : hit_slides) with_new += slides0.count(s) == 0 ? 1 : 0;
    }
    EXPECT_GT(with_new, 0) << "no answer held a slide of generation 1: the check cannot fail";
    const auto outcomes = job.stop();
    EXPECT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
  }
}

// Issue 30, item 14: a stop left the searches in flight waiting for rounds that no longer ran,
// until the request timeout (30 s) answered them 503. They are answered now, later ones are refused
// as the service stops, every rank returns 0 and the registration is removed.
TEST_F(ServeRun, AStopAnswersTheSearchesInFlight) {
  const std::string registry = *dir_ / "stop-registry";
  Job job(2, config(run_dir() + "/ingest/flat", registry));
  const std::optional<int> port = job.port(registry, "flat");
  ASSERT_TRUE(port.has_value()) << describe(job.stop());
  SearchLoad load(*port, some_patches(), 4);
  for (int i = 0; i < 500 && load.answered() < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = job.stop();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  load.finish();
  EXPECT_EQ(exit_codes(outcomes), std::vector<int>(2, 0)) << describe(outcomes);
  EXPECT_LT(seconds, 15) << "the stop waited for the request timeout";
  EXPECT_FALSE(fs::exists(registry + "/flat.json")) << "the registration outlived the service";
  for (size_t i = 0; i < load.statuses_.size(); ++i) {
    EXPECT_EQ(load.statuses_[i], 503) << load.refusals_[i];
    EXPECT_NE(load.refusals_[i].find("stopping"), std::string::npos) << load.refusals_[i];
  }
}

}  // namespace
}  // namespace tessera::inprocess
