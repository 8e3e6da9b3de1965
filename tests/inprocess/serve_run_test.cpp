// serve::run at R = 1..3 ranks as threads over one ingest output of 3 shards: rank 0 answers HTTP,
// searches go through the ranks' collective rounds, the hits do not depend on R (a rank without
// shards included), a stop ends every rank with 0, and a missing shard ends every rank alike.
#include <chrono>
#include <optional>
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

}  // namespace
}  // namespace tessera::inprocess
