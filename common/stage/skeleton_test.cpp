// The stage skeleton driven in-process with the serial communicator and a stage that records
// what it was asked to do.
#include "common/stage/skeleton.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class RecordingWork final : public StageWork {
 public:
  explicit RecordingWork(std::string dir) : dir_(std::move(dir)) {}
  std::optional<int> setup(Comm&, StageAction action) override {
    ++setups;
    last_action = action;
    return early_exit;
  }
  RankResult rank_work(int rank, int world_size) override {
    ++rank_works;
    EXPECT_EQ(world_size, 1);
    const std::string a = "out/" + rank_file_name(rank, ".a");
    const std::string b = "out/" + rank_file_name(rank, ".b");
    atomic_write_file((fs::path(dir_) / a).string(), std::string(200000, 'a'));
    atomic_write_file((fs::path(dir_) / b).string(), "bb");
    return {{a, b}, {{"rows", 7}}};
  }
  nlohmann::json finish(Comm&, const std::vector<nlohmann::json>& markers) override {
    ++finishes;
    EXPECT_EQ(markers.size(), 1u);
    EXPECT_EQ(markers.at(0).at("rows"), 7);
    EXPECT_EQ(markers.at(0).at("outputs").size(), 2u);
    return {{"exit_code", finish_code}, {"things", 3}};
  }
  int setups = 0, rank_works = 0, finishes = 0;
  int finish_code = 0;
  std::optional<int> early_exit;
  StageAction last_action = StageAction::kFresh;

 private:
  std::string dir_;
};

class SkeletonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_skeleton_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    run_ = {"test", dir_.string(), "a = 1\n", "fp", {}, {{"part", 0}, {"parts", 1}}};
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  StageRun run_;
  SerialComm comm_;
};

TEST_F(SkeletonTest, FreshRunWritesMarkerThenSuccess) {
  RecordingWork work(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, work), 0);
  EXPECT_EQ(work.setups, 1);
  EXPECT_EQ(work.rank_works, 1);
  EXPECT_EQ(work.finishes, 1);
  auto marker = read_json_file(marker_path(dir_.string(), 0));
  ASSERT_TRUE(marker);
  EXPECT_EQ(marker->at("outputs").at(1).at("bytes"), 2);
  EXPECT_EQ(marker->at("part"), 0);
  auto success = read_json_file((dir_ / "_SUCCESS").string());
  ASSERT_TRUE(success);
  EXPECT_EQ(success->at("things"), 3);
  EXPECT_EQ(success->at("stage"), "test");
}

TEST_F(SkeletonTest, CompleteRunDoesNothingAndReturnsItsExitCode) {
  RecordingWork first(dir_.string());
  first.finish_code = kExitSlidesFailed;
  EXPECT_EQ(run_stage(comm_, run_, first), kExitSlidesFailed);
  RecordingWork again(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, again), kExitSlidesFailed);
  EXPECT_EQ(again.setups + again.rank_works + again.finishes, 0);
}

TEST_F(SkeletonTest, ResumeSkipsValidRankWorkAndRedoesDamagedWork) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  fs::remove(dir_ / "_SUCCESS");  // as if rank 0 died in its finish
  RecordingWork resumed(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, resumed), 0);
  EXPECT_EQ(resumed.last_action, StageAction::kResume);
  EXPECT_EQ(resumed.rank_works, 0);
  EXPECT_EQ(resumed.finishes, 1);

  // A damaged output is found by the cheap check at the file's end ...
  fs::remove(dir_ / "_SUCCESS");
  atomic_write_file((dir_ / "out/rank-00000.a").string(), std::string(199999, 'a') + "x");
  RecordingWork redo(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, redo), 0);
  EXPECT_EQ(redo.rank_works, 1);

  // ... and in its middle only by --verify full.
  fs::remove(dir_ / "_SUCCESS");
  std::string middle(200000, 'a');
  middle[100000] = 'x';
  atomic_write_file((dir_ / "out/rank-00000.a").string(), middle);
  RecordingWork cheap(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, cheap), 0);
  EXPECT_EQ(cheap.rank_works, 0);
  fs::remove(dir_ / "_SUCCESS");
  run_.options.verify = VerifyLevel::kFull;
  RecordingWork full(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, full), 0);
  EXPECT_EQ(full.rank_works, 1);
}

TEST_F(SkeletonTest, SetupCanEndTheStageEarly) {
  RecordingWork work(dir_.string());
  work.early_exit = kExitSlidesFailed;
  EXPECT_EQ(run_stage(comm_, run_, work), kExitSlidesFailed);
  EXPECT_EQ(work.rank_works, 0);
  EXPECT_FALSE(fs::exists(dir_ / "_SUCCESS"));
}

TEST_F(SkeletonTest, ChangedConfigurationIsRefusedUnlessOverwrite) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  run_.fingerprint = "other";
  RecordingWork refused(dir_.string());
  EXPECT_THROW(run_stage(comm_, run_, refused), InvalidInput);
  run_.options.overwrite = true;
  RecordingWork replaced(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, replaced), 0);
  EXPECT_EQ(replaced.rank_works, 1);
}

TEST(PartDir, OnePartIsTheRootItself) {
  EXPECT_EQ(part_dir("RUN/patchgen", 0, 1), "RUN/patchgen");
  EXPECT_EQ(part_dir("RUN/patchgen", 3, 12), "RUN/patchgen/part-00003-of-00012");
}

}  // namespace
}  // namespace tessera
