// aggregate::run at R = 1..3 ranks as threads over one embed output: the same cohort file and the
// same per-slide files whatever R, at slide and patient level, and failures that end every rank
// alike.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/store/slide_vectors.h"
#include "stages/aggregate/aggregate.h"
#include "stages/aggregate/config.h"
#include "common/vector/slide_catalog.h"
#include "stages/ingest/slide_index.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

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
  static aggregate::Config config(const std::string& run, const std::string& name,
                                  std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--run", run, "--name", name, "--file-locking", "false"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stage_config(aggregate::option_table(), args, aggregate::config_from);
  }
  // Where the layout puts the output `name` of `run`.
  static std::string output(const std::string& run, const std::string& name) {
    return RunLayout(run).stage_root("aggregate", name);
  }
  // The files of an output that hold vectors (every .h5 and .pt below it, by relative path), with
  // their bytes; the skeleton's own files (run.json, markers, _SUCCESS) hold times: left out.
  // TRIDENT's "savetodir" attribute names the file's own folder: its occurrences of `dir` become
  // "<dir>" (the outputs compared have names of one length, so nothing else moves).
  static std::map<std::string, std::string> vector_files(const std::string& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h5" && ext != ".pt")) continue;
      if (e.path().parent_path().filename() == "vectors") continue;  // rank-local, R-dependent
      std::string bytes = file_bytes(e.path().string());
      for (size_t at; (at = bytes.find(dir)) != std::string::npos;) {
        bytes.replace(at, dir.size(), "<dir>");
      }
      files[fs::relative(e.path(), dir).string()] = bytes;
    }
    return files;
  }

  static ScratchDir* dir_;
};

ScratchDir* AggregateRun::dir_ = nullptr;

TEST_F(AggregateRun, VectorsDoNotDependOnTheNumberOfRanks) {
  for (const std::string level : {"slide", "patient"}) {
    CohortVectors first;
    std::map<std::string, std::string> first_files;
    for (int ranks = 1; ranks <= 3; ++ranks) {
      const std::string name = fmt::format("{}-r{}", level, ranks);
      const auto outcomes = run_stage_ranks(
          ranks, aggregate::run,
          config(run_dir(), name, {"--level", level, "--pooling", "mean+max"}));
      ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
      const std::string dir = output(run_dir(), name);
      const CohortVectors cohort = read_cohort_vectors(dir + "/" + cohort_file_name(level));
      const auto files = vector_files(dir);
      if (ranks == 1) {
        // a, b, c of patients P1, P1, P2: three slides, or two patients.
        ASSERT_EQ(cohort.ids.size(), level == "slide" ? 3u : 2u);
        EXPECT_TRUE(cohort.skipped_ids.empty());
        EXPECT_EQ(cohort.features.size(), cohort.ids.size() * static_cast<size_t>(cohort.dim));
        EXPECT_GT(files.size(), 1u);
        first = cohort;
        first_files = files;
        continue;
      }
      EXPECT_EQ(cohort.ids, first.ids) << name;
      EXPECT_EQ(cohort.n_patches, first.n_patches) << name;
      EXPECT_EQ(cohort.features, first.features) << name;  // bit for bit
      ASSERT_EQ(files.size(), first_files.size()) << name;
      for (const auto& [path, bytes] : first_files) {
        EXPECT_TRUE(files.count(path) && files.at(path) == bytes) << name << ": " << path;
      }
    }
  }
}

// The outputs lie in aggregate's folder of the run layout, RUN/slides/<name>, and the slide index
// ingest --level slide builds over them at R ranks is the same bytes whatever R.
TEST_F(AggregateRun, SlideIndexDoesNotDependOnTheNumberOfRanks) {
  const RunLayout layout(run_dir());
  std::string first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("mean-r{}", ranks);
    const auto made = run_stage_ranks(ranks, aggregate::run, config(run_dir(), name));
    ASSERT_EQ(exit_codes(made), std::vector<int>(ranks, 0)) << describe(made);
    EXPECT_TRUE(fs::exists(run_dir() + "/slides/" + name + "/" + cohort_file_name("slide")));
    const auto indexed = run_stage_ranks(
        ranks, ingest::run,
        ingest_config(run_dir(), "slides-" + name,
                      {"--level", "slide", "--slides", name, "--normalize"}));
    ASSERT_EQ(exit_codes(indexed), std::vector<int>(ranks, 0)) << describe(indexed);
    const SlideCatalog catalog =
        load_slide_catalog(layout.stage_root(kIngestStage, "slides-" + name));
    EXPECT_EQ(catalog.rows, 3);
    const std::string index = file_bytes(catalog.path(catalog.index_file));
    EXPECT_FALSE(index.empty());
    if (ranks == 1) {
      first = index;
    } else {
      EXPECT_TRUE(index == first) << "slide index at R = " << ranks << " differs from R = 1";
    }
  }
}

// A slide's feature file truncated behind embed's back: rank 0 checks the embed output before any
// rank starts, so every rank ends with the same IoError and no output is taken for complete.
TEST_F(AggregateRun, ADamagedInputEndsEveryRankAndNothingIsComplete) {
  const std::string run = *dir_ / "damaged";
  fs::create_directories(run);
  for (const char* stage : {"patchgen", "embed"}) {
    fs::copy(run_dir() + "/" + stage, run + "/" + stage, fs::copy_options::recursive);
  }
  const std::string features = run + "/embed/vit-tiny/features/b.h5";
  ASSERT_TRUE(fs::exists(features));
  fs::resize_file(features, fs::file_size(features) / 2);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("r{}", ranks);
    const auto outcomes = run_stage_ranks(ranks, aggregate::run, config(run, name));
    for (const auto& o : outcomes) EXPECT_NE(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(describe(outcomes).find("b.h5"), std::string::npos) << describe(outcomes);
    EXPECT_FALSE(fs::exists(output(run, name) + "/_SUCCESS")) << name;
  }
}

// A slide encoder that is not a TorchScript module is bad input on every rank, and nothing of the
// output is made: no folder that tessera-status would list as incomplete (issue 30).
TEST_F(AggregateRun, AnUnloadableSlideEncoderIsBadInputAndWritesNothing) {
  const std::string not_a_model = *dir_ / "not-a-model.pt";
  std::ofstream(not_a_model) << "root:x:0:0:root:/root:/bin/bash\n";
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string name = fmt::format("encoder-r{}", ranks);
    const auto outcomes = run_stage_ranks(
        ranks, aggregate::run, config(run_dir(), name, {"--slide-encoder", not_a_model}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, not_a_model);
    EXPECT_FALSE(fs::exists(output(run_dir(), name))) << name;
  }
}

// Rank 0 decides for all: an embed tag that does not exist is the same InvalidInput on every rank.
TEST_F(AggregateRun, AMissingEmbedOutputIsBadInputOnEveryRank) {
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes =
        run_stage_ranks(ranks, aggregate::run, config(run_dir(), "missing", {"--tag", "no-such"}));
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "no-such");
  }
}

}  // namespace
}  // namespace tessera::inprocess
