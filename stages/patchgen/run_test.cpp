// patchgen::run at R = 1, 2, 3 ranks as threads: the same run whatever R, and failures that end
// every rank alike.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/digest.h"
#include "stages/patchgen/patchgen.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

class PatchgenRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_patchgen");
    manifest_ = write_cohort(dir_->path().string());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static patchgen::Config config(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--manifest", manifest_,  "--out",          out,
                                     "--patch-size", "64",     "--file-locking", "false",
                                     "--reader-threads", "1",  "--progress-interval", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return stage_config(patchgen::option_table(), args, patchgen::config_from);
  }
  static std::string out(const std::string& name) { return *dir_ / name; }

  static ScratchDir* dir_;
  static std::string manifest_;
};

ScratchDir* PatchgenRun::dir_ = nullptr;
std::string PatchgenRun::manifest_;

TEST_F(PatchgenRun, TheRunDoesNotDependOnTheNumberOfRanks) {
  std::optional<patchgen::RunDigest> first;
  for (const auto& [ranks, partition] :
       std::vector<std::pair<int, std::string>>{{1, "contiguous"}, {2, "contiguous"},
                                                {3, "contiguous"}, {3, "cyclic"}}) {
    const std::string run = out(fmt::format("r{}-{}", ranks, partition));
    const auto outcomes =
        run_stage_ranks(ranks, patchgen::run, config(run, {"--partition", partition}));
    ASSERT_EQ(exit_codes(outcomes), std::vector<int>(ranks, 0)) << describe(outcomes);
    const patchgen::RunDigest digest = patchgen::digest_run(run + "/patchgen");
    EXPECT_GT(digest.patches, 20);
    if (!first) {
      first = digest;
      continue;
    }
    EXPECT_EQ(digest.patches, first->patches) << ranks << " ranks, " << partition;
    EXPECT_EQ(digest.index_sha256, first->index_sha256) << ranks << " ranks, " << partition;
    EXPECT_EQ(digest.pixels_sha256, first->pixels_sha256) << ranks << " ranks, " << partition;
  }
}

TEST_F(PatchgenRun, ACompleteRunIsKeptAndAnotherRankCountIsRefusedOnEveryRank) {
  const std::string run = out("rerun");
  ASSERT_EQ(exit_codes(run_stage_ranks(2, patchgen::run, config(run))), (std::vector<int>{0, 0}));
  const std::string success = file_bytes(run + "/patchgen/_SUCCESS");
  ASSERT_FALSE(success.empty());
  EXPECT_EQ(exit_codes(run_stage_ranks(2, patchgen::run, config(run))), (std::vector<int>{0, 0}));
  EXPECT_EQ(file_bytes(run + "/patchgen/_SUCCESS"), success) << "a complete run was redone";
  // Rank 0 refuses for all: every rank throws the same InvalidInput, none is merely released.
  const auto outcomes = run_stage_ranks(3, patchgen::run, config(run));
  expect_job_failed<InvalidInput>(outcomes, kExitBadInput,
                                  "is complete already, made with 2 ranks (this run has 3)");
  for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
}

TEST_F(PatchgenRun, AManifestNamingAMissingSlideEndsEveryRankWithBadInputBeforeWriting) {
  const std::string manifest = *dir_ / "missing.csv";
  std::ofstream(manifest) << "slide_id,path\na,s0.tif\nz,nowhere.tif\n";
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string run = out(fmt::format("missing-r{}", ranks));
    patchgen::Config c = config(run);
    c.manifest = manifest;
    const auto outcomes = run_stage_ranks(ranks, patchgen::run, c);
    // Rank 0 validates; its InvalidInput reaches every rank (decided_by_root), none is aborted.
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "nowhere.tif");
    for (const auto& o : outcomes) EXPECT_FALSE(threw<CommAborted>(o)) << describe(outcomes);
    EXPECT_FALSE(path_exists(run + "/patchgen")) << "something was written";
  }
}

TEST_F(PatchgenRun, AnUnreadableSlideFailsThatSlideOnlyAndTheRunAlike) {
  std::ofstream(*dir_ / "broken.tif") << "not a TIFF";
  const std::string manifest = *dir_ / "broken.csv";
  std::ofstream(manifest) << "slide_id,path\na,s0.tif\nbroken,broken.tif\nc,s2.tif\n";
  std::optional<patchgen::RunDigest> first;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string run = out(fmt::format("broken-r{}", ranks));
    patchgen::Config c = config(run);
    c.manifest = manifest;
    const auto outcomes = run_stage_ranks(ranks, patchgen::run, c);
    EXPECT_EQ(exit_codes(outcomes), std::vector<int>(ranks, kExitSlidesFailed))
        << describe(outcomes);
    const auto success = read_json_file(run + "/patchgen/_SUCCESS");
    ASSERT_TRUE(success.has_value());
    EXPECT_EQ(success->value("slides_failed", -1), 1);
    const patchgen::RunDigest digest = patchgen::digest_run(run + "/patchgen");
    if (!first) {
      first = digest;
    } else {
      EXPECT_EQ(digest.index_sha256, first->index_sha256) << ranks << " ranks";
      EXPECT_EQ(digest.pixels_sha256, first->pixels_sha256) << ranks << " ranks";
    }
  }
}

// A manifest that rank 0 validated but another rank cannot read (a file system mounted on rank
// 0's node only): that rank's InvalidInput ends the job, the others are released from their next
// collective with its exit code, and nothing is marked complete.
TEST_F(PatchgenRun, AManifestOneRankCannotReadEndsEveryRankWithItsExitCode) {
  for (int ranks = 2; ranks <= 3; ++ranks) {
    const std::string run = out(fmt::format("unreadable-r{}", ranks));
    const patchgen::Config good = config(run);
    patchgen::Config bad = good;
    bad.manifest = *dir_ / "not-mounted-here.csv";
    const auto outcomes = run_rank_outcomes(ranks, [&](Comm& comm) {
      return patchgen::run(comm.rank() == ranks - 1 ? bad : good, comm);
    });
    expect_job_failed<InvalidInput>(outcomes, kExitBadInput, "not-mounted-here.csv");
    EXPECT_TRUE(threw<InvalidInput>(outcomes[ranks - 1])) << describe(outcomes);
    EXPECT_FALSE(path_exists(run + "/patchgen/_SUCCESS"));
  }
}

}  // namespace
}  // namespace tessera::inprocess
