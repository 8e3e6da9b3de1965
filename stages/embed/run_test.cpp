// embed::run at R = 1, 2, 3 ranks as threads over one patchgen run: the same embeddings whatever
// R (bit for bit with --deterministic), and failures that end every rank alike.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/mpi/comm.h"
#include "common/store/embeddings.h"
#include "stages/embed/config.h"
#include "stages/embed/embed.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

namespace names = embedding_names;

struct Embeddings {
  std::vector<int64_t> ids;
  std::vector<float> values;
  int64_t dim = 0;
};

Embeddings read_embeddings(const std::string& stage_dir) {
  h5::File f = h5::File::open(stage_dir + "/embeddings.h5", h5::Mode::kRead);
  Embeddings e;
  e.ids = f.open_dataset(names::kPatchId).read_all<int64_t>();
  h5::Dataset values = f.open_dataset(names::kEmbeddings);
  e.dim = static_cast<int64_t>(values.dims().at(1));
  e.values = values.read_all<float>();
  return e;
}

std::vector<float> read_features(const std::string& stage_dir, const std::string& slide) {
  h5::File f = h5::File::open(stage_dir + "/features/" + slide + ".h5", h5::Mode::kRead);
  return f.open_dataset(names::kFeatures).read_all<float>();
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

class EmbedRun : public ::testing::Test {
 protected:
  // One patchgen run, made once for the suite.
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_embed");
    const std::string manifest = write_cohort(dir_->path().string());
    const patchgen::Config config = stage_config(
        patchgen::option_table(),
        {"--manifest", manifest, "--out", run_dir(), "--patch-size", "64", "--file-locking",
         "false", "--reader-threads", "1", "--qc", "false"},
        patchgen::config_from);
    SerialComm comm;
    ASSERT_EQ(patchgen::run(config, comm), 0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string run_dir() { return *dir_ / "run"; }
  static embed::Config config(const std::string& run, const std::string& tag,
                              std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--run", run, "--tag", tag, "--model", "vit-tiny",
                                     "--batch-size", "8", "--torch-threads", "1",
                                     "--file-locking", "false", "--progress-interval", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stage_config(embed::option_table(), args, embed::config_from);
  }
  // A copy of the patchgen run, to damage.
  static std::string copy_of_run(const std::string& name) {
    const std::string copy = *dir_ / name;
    fs::create_directories(copy);
    fs::copy(run_dir() + "/patchgen", copy + "/patchgen", fs::copy_options::recursive);
    return copy;
  }

  static ScratchDir* dir_;
};

ScratchDir* EmbedRun::dir_ = nullptr;

TEST_F(EmbedRun, EmbeddingsDoNotDependOnTheNumberOfRanks) {
  for (const bool deterministic : {true, false}) {
    std::optional<Embeddings> first;
    for (int ranks = 1; ranks <= 3; ++ranks) {
      const std::string tag = fmt::format("{}-r{}", deterministic ? "det" : "batched", ranks);
      std::vector<std::string> extra;
      if (deterministic) extra.push_back("--deterministic");
      const auto outcomes = run_stage_ranks(ranks, embed::run, config(run_dir(), tag, extra));
      ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
      const std::string stage = run_dir() + "/embed/" + tag;
      const Embeddings e = read_embeddings(stage);
      ASSERT_GT(e.ids.size(), 20u);
      ASSERT_EQ(e.values.size(), e.ids.size() * static_cast<size_t>(e.dim));
      if (!first) {
        first = e;
        continue;
      }
      EXPECT_EQ(e.ids, first->ids) << tag;
      if (deterministic) {
        EXPECT_EQ(e.values, first->values) << tag << ": --deterministic differs in bits";
      } else {
        EXPECT_LE(max_abs_diff(e.values, first->values), 1e-5f) << tag;
      }
      // The per-slide files hold the same rows, whichever rank wrote them.
      const std::string first_stage =
          run_dir() + "/embed/" + fmt::format("{}-r1", deterministic ? "det" : "batched");
      for (const char* slide : {"a", "b", "c"}) {
        const auto mine = read_features(stage, slide);
        const auto theirs = read_features(first_stage, slide);
        ASSERT_EQ(mine.size(), theirs.size()) << tag << " slide " << slide;
        EXPECT_LE(max_abs_diff(mine, theirs), deterministic ? 0.0f : 1e-5f) << tag << " " << slide;
      }
    }
  }
}

// A truncated patch shard is found by every rank's check of its input: each throws the same
// IoError itself (none is merely released) and nothing is embedded.
TEST_F(EmbedRun, ATruncatedInputFailsEveryRankWithTheSameIoError) {
  const std::string run = copy_of_run("truncated");
  const std::string shard = run + "/patchgen/shards/rank-00000.h5";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const auto outcomes = run_stage_ranks(ranks, embed::run, config(run, "t"));
    expect_job_failed<IoError>(outcomes, kExitError, "is damaged or incomplete");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
  }
  EXPECT_FALSE(path_exists(run + "/embed/t/_SUCCESS"));
}

// Damage inside the patch store passes the cheap input check (sizes and ends); the rank that
// reads the damaged rows fails on their checksums and the others are released with exit code 1.
TEST_F(EmbedRun, DamagedPatchesFailTheRankReadingThemAndEndTheOthers) {
  const std::string run = copy_of_run("damaged");
  damage_middle(run + "/patchgen/shards/rank-00000.h5", 256);
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string tag = fmt::format("r{}", ranks);
    const auto outcomes = run_stage_ranks(ranks, embed::run, config(run, tag));
    expect_job_failed<IoError>(outcomes, kExitError, "rank-00000.h5");
    EXPECT_FALSE(path_exists(run + "/embed/" + tag + "/_SUCCESS"));
  }
}

// A model file that only rank 0 can read (a file system mounted on its node only): the rank that
// cannot load it ends the job with bad input, nothing is marked complete.
TEST_F(EmbedRun, AModelOneRankCannotLoadEndsEveryRankWithItsExitCode) {
  for (int ranks = 2; ranks <= 3; ++ranks) {
    const std::string tag = fmt::format("model-r{}", ranks);
    const embed::Config good = config(run_dir(), tag);
    embed::Config bad = good;
    bad.model = *dir_ / "not-mounted-here.pt";
    const auto outcomes = run_rank_outcomes(ranks, [&](Comm& comm) {
      return embed::run(comm.rank() == ranks - 1 ? bad : good, comm);
    });
    ASSERT_TRUE(outcomes[ranks - 1].error) << describe(outcomes);
    const int code = outcomes[ranks - 1].exit_code;
    EXPECT_NE(code, 0);
    for (const auto& o : outcomes) EXPECT_EQ(o.exit_code, code) << describe(outcomes);
    for (int r = 0; r + 1 < ranks; ++r) {
      EXPECT_TRUE(threw<CommAborted>(outcomes[r])) << describe(outcomes);
    }
    EXPECT_NE(what_of(outcomes[ranks - 1]).find("not-mounted-here.pt"), std::string::npos)
        << describe(outcomes);
    EXPECT_FALSE(path_exists(run_dir() + "/embed/" + tag + "/_SUCCESS"));
  }
}

}  // namespace
}  // namespace tessera::inprocess
