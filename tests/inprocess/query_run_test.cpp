// query::run at R = 1..4 ranks as threads over one ingest output of 3 shards: the same hits
// whatever R (a rank without shards included), and failures that end every rank alike.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "stages/query/config.h"
#include "stages/query/query.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

using Hits = std::vector<std::vector<std::pair<int64_t, float>>>;

class QueryRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_query");
    make_upstream(dir_->path().string(), run_dir(), true);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  static std::string index_dir(const std::string& name = "flat") {
    return run_dir() + "/ingest/" + name;
  }
  static query::Config config(const std::string& output, std::vector<std::string> extra,
                              const std::string& index = index_dir()) {
    std::vector<std::string> args = {"--index", index,    "--format", "json", "--output",
                                     output,    "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stage_config(query::option_table(), args, query::config_from);
  }
  static std::vector<int64_t> some_patches() { return every_third_patch(run_dir()); }
  static Hits hits_in(const std::string& report) {
    Hits out;
    const nlohmann::json j = nlohmann::json::parse(file_bytes(report));
    for (const auto& q : j.at("queries")) {
      auto& list = out.emplace_back();
      for (const auto& h : q.at("hits")) {
        list.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
      }
    }
    return out;
  }

  static ScratchDir* dir_;
};

ScratchDir* QueryRun::dir_ = nullptr;

TEST_F(QueryRun, HitsDoNotDependOnTheNumberOfRanks) {
  const std::vector<int64_t> patches = some_patches();
  ASSERT_GE(patches.size(), 3u);
  const std::vector<std::vector<std::string>> queries = {
      {"--patch", std::to_string(patches[0]), "-k", "7"},
      {"--patch", std::to_string(patches[1]), "-k", "5", "--filter", "site = lung"},
      {"--patch", std::to_string(patches[2]), "-k", "5", "--exclude-same-patient"},
      {"--slide", "b", "--x", "300", "--y", "300", "-k", "4"},
  };
  int q = 0;
  for (const auto& query : queries) {
    Hits first;
    for (int ranks = 1; ranks <= 4; ++ranks) {
      const std::string report = *dir_ / fmt::format("q{}-r{}.json", q, ranks);
      const auto outcomes = run_stage_ranks(ranks, query::run, config(report, query));
      ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
      const Hits hits = hits_in(report);
      ASSERT_EQ(hits.size(), 1u);
      EXPECT_FALSE(hits[0].empty());
      if (ranks == 1) {
        first = hits;
      } else {
        EXPECT_EQ(hits, first) << "query " << q << " at " << ranks << " ranks";
      }
    }
    ++q;
  }
}

// Rank 0 alone looks the patches up and draws the mosaic: the same image whatever R.
TEST_F(QueryRun, TheMosaicDoesNotDependOnTheNumberOfRanks) {
  const std::string patch = std::to_string(some_patches()[1]);
  std::string first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string mosaic = *dir_ / fmt::format("mosaic-r{}.png", ranks);
    const auto outcomes = run_stage_ranks(
        ranks, query::run,
        config(*dir_ / "mosaic.json", {"--patch", patch, "-k", "4", "--mosaic", mosaic}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    const std::string png = file_bytes(mosaic);
    ASSERT_GT(png.size(), 1000u) << ranks << " ranks";
    if (ranks == 1) {
      first = png;
    } else {
      EXPECT_TRUE(png == first) << "the mosaic at " << ranks << " ranks differs from R = 1";
    }
  }
}

// Rank 0 resolves the queries for all: an unknown patch is the same InvalidInput on every rank.
TEST_F(QueryRun, AnUnknownPatchIsBadInputOnEveryRank) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, query::run, config(*dir_ / "unknown.json", {"--patch", "999999999999"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "unknown patch id 999999999999");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
  EXPECT_FALSE(path_exists(*dir_ / "unknown.json"));
}

// Every rank checks the filter against the columns itself.
TEST_F(QueryRun, AFilterOnAnUnknownColumnIsBadInputOnEveryRank) {
  const std::string patch = std::to_string(some_patches()[0]);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, query::run,
        config(*dir_ / "filter.json", {"--patch", patch, "--filter", "organ = lung"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "organ");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
}

// A shard file gone: the rank that owns it fails with IoError, the others are released with its
// exit code, and no report is written.
TEST_F(QueryRun, AMissingShardFailsItsRankAndEndsTheOthers) {
  const std::string broken = index_dir("broken");
  fs::copy(index_dir(), broken, fs::copy_options::recursive);
  fs::remove(broken + "/gen-00000/shards/shard-00001/index.faiss");
  const std::string patch = std::to_string(some_patches()[0]);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string report = *dir_ / fmt::format("broken-r{}.json", ranks);
    const auto outcomes =
        run_stage_ranks(ranks, query::run, config(report, {"--patch", patch}, broken));
    expect_job_failed<IoError>(outcomes, kExitError, "shard-00001");
    // Shard 1 belongs to rank 1 mod R.
    EXPECT_TRUE(threw<IoError>(outcomes[1 % ranks])) << describe(outcomes);
    EXPECT_FALSE(path_exists(report));
  }
}

}  // namespace
}  // namespace tessera::inprocess
