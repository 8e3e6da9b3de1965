#include "common/core/hash.h"
#include "common/stage/marker.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class MarkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_marker_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "shards");
    atomic_write_file((dir_ / "shards" / "rank-00000.h5").string(), "shard bytes");
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json good_marker() {
    auto m = marker_base("patchgen", 0, 2, "fp");
    m["file"] = "shards/rank-00000.h5";
    m["file_bytes"] = 11;
    m["file_sha256"] = sha256_hex("shard bytes");
    return m;
  }
  std::string write_marker(const nlohmann::json& m) {
    auto path = (dir_ / "markers" / "rank-00000.json").string();
    atomic_write_file(path, m.dump());
    return path;
  }
  fs::path dir_;
};

TEST_F(MarkerTest, ValidMarkerMatchesFile) {
  auto check = check_marker(write_marker(good_marker()), dir_.string(), "fp", 2);
  EXPECT_TRUE(check.valid) << check.reason;
}

TEST_F(MarkerTest, EachMismatchIsReported) {
  auto path = write_marker(good_marker());
  EXPECT_EQ(check_marker(path, dir_.string(), "other", 2).reason,
            "configuration fingerprint differs");
  EXPECT_EQ(check_marker(path, dir_.string(), "fp", 3).reason, "world size differs");
  atomic_write_file((dir_ / "shards" / "rank-00000.h5").string(), "shard bytez");
  EXPECT_NE(check_marker(path, dir_.string(), "fp", 2).reason.find("SHA-256"), std::string::npos);
  EXPECT_TRUE(check_marker(path, dir_.string(), "fp", 2, /*verify_hash=*/false).valid);
  atomic_write_file((dir_ / "shards" / "rank-00000.h5").string(), "short");
  EXPECT_NE(check_marker(path, dir_.string(), "fp", 2).reason.find("bytes"), std::string::npos);
  fs::remove(dir_ / "shards" / "rank-00000.h5");
  EXPECT_NE(check_marker(path, dir_.string(), "fp", 2).reason.find("missing"), std::string::npos);
  EXPECT_EQ(check_marker((dir_ / "nope.json").string(), dir_.string(), "fp", 2).reason,
            "marker missing");
  atomic_write_file(path, "{ not json");
  EXPECT_FALSE(check_marker(path, dir_.string(), "fp", 2).valid);
}

TEST(PlanStage, Decisions) {
  nlohmann::json run = {{"config_fingerprint", "fp"}, {"world_size", 2}};
  EXPECT_EQ(plan_stage("d", std::nullopt, false, "fp", 2, false), StageAction::kFresh);
  EXPECT_EQ(plan_stage("d", run, false, "fp", 2, false), StageAction::kResume);
  EXPECT_EQ(plan_stage("d", run, true, "fp", 2, false), StageAction::kComplete);
  EXPECT_EQ(plan_stage("d", run, true, "other", 3, true), StageAction::kFresh);
  EXPECT_THROW(plan_stage("d", run, false, "other", 2, false), InvalidInput);
  try {
    plan_stage("RUN/patchgen", run, false, "fp", 3, false);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("2 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RUN/patchgen"), std::string::npos) << e.what();
  }
}

TEST(PrepareStage, FreshWritesRunFilesAndResumeKeepsOutputs) {
  auto dir = fs::temp_directory_path() / ("tessera_prepare_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SerialComm comm;
  {
    auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 1\n", "fp", false);
    EXPECT_EQ(state.action, StageAction::kFresh);
    EXPECT_TRUE(state.lock.has_value());
    EXPECT_EQ(read_file((dir / "config.ini").string()), "a = 1\n");
    atomic_write_file((dir / "markers" / "rank-00000.json").string(), "{}");
  }
  {
    auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 1\n", "fp", false);
    EXPECT_EQ(state.action, StageAction::kResume);
    EXPECT_TRUE(fs::exists(dir / "markers" / "rank-00000.json"));
  }
  EXPECT_THROW(prepare_stage(comm, "patchgen", dir.string(), "a = 2\n", "fp2", false), InvalidInput);
  auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 2\n", "fp2", true);
  EXPECT_EQ(state.action, StageAction::kFresh);
  EXPECT_FALSE(fs::exists(dir / "markers"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
