// aggregate::run at R = 1, 2, 3 ranks as threads (as tests/inprocess does for the other stages) over
// one embed output, then ingest --level slide over each: the same vectors (bitwise) whatever R, the outputs under RUN/slides/<name> (the run
// layout's folder of the stage), and a bad tag ending every rank alike.
#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/stage/layout.h"
#include "common/store/slide_features.h"
#include "common/store/slide_vectors.h"
#include "stages/aggregate/aggregate.h"
#include "stages/aggregate/config.h"
#include "stages/ingest/slide_index.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

aggregate::Config aggregate_config(const std::string& run, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--run", run, "--file-locking", "false"};
  args.insert(args.end(), extra.begin(), extra.end());
  return stage_config(aggregate::option_table(), args, aggregate::config_from);
}

class AggregateRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_aggregate");
    make_upstream(dir_->path().string(), run_dir(), false);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  static ScratchDir* dir_;
};

ScratchDir* AggregateRun::dir_ = nullptr;

TEST_F(AggregateRun, SameVectorsAndSlideIndexWhateverTheRanks) {
  const RunLayout layout(run_dir());
  CohortVectors first;
  std::string first_index;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("mean-r{}", ranks);
    const auto outcomes = run_stage_ranks(
        ranks, aggregate::run, aggregate_config(run_dir(), {"--tag", "vit-tiny", "--name", name}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    const std::string out = layout.stage_root(kAggregateStage, name);
    EXPECT_EQ(out, run_dir() + "/slides/" + name);
    const CohortVectors v = read_cohort_vectors(out + "/" + cohort_file_name("slide"));
    EXPECT_EQ(v.ids, (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(v.encoder, "mean-vit-tiny");

    const auto indexed = run_stage_ranks(
        ranks, ingest::run,
        ingest_config(run_dir(), "slides-" + name,
                      {"--level", "slide", "--slides", name, "--normalize"}));
    ASSERT_EQ(exit_codes(indexed), std::vector<int>(ranks, 0)) << describe(indexed);
    const ingest::SlideCatalog catalog =
        ingest::load_slide_catalog(layout.stage_root(kIngestStage, "slides-" + name));
    EXPECT_EQ(catalog.rows, 3);
    const std::string index = file_bytes(catalog.path(catalog.index_file));
    EXPECT_FALSE(index.empty());
    if (ranks == 1) {
      first = v;
      first_index = index;
      continue;
    }
    EXPECT_EQ(v.features, first.features) << "R = " << ranks;
    EXPECT_TRUE(index == first_index) << "slide index at R = " << ranks << " differs from R = 1";
  }
}

TEST_F(AggregateRun, AnUnknownTagEndsEveryRankWithInvalidInput) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(
        ranks, aggregate::run,
        aggregate_config(run_dir(), {"--tag", "nope", "--name", fmt::format("bad-r{}", ranks)}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "nope");
  }
}

}  // namespace
}  // namespace tessera::inprocess
