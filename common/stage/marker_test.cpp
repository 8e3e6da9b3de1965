#include "common/stage/marker.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/hash.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class MarkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_marker_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "shards");
    write_shard("a", std::string(300000, 'x'));
    write_shard("b", "small");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_shard(const std::string& name, const std::string& content) {
    atomic_write_file((dir_ / "shards" / name).string(), content);
  }
  nlohmann::json good_marker() {
    auto m = marker_base("patchgen", 0, 2, "fp");
    m["outputs"] = {seal_output(dir_.string(), "shards/a").to_json(),
                    seal_output(dir_.string(), "shards/b").to_json()};
    return m;
  }
  std::string write_marker(const nlohmann::json& m) {
    auto path = (dir_ / "markers" / "rank-00000.json").string();
    atomic_write_file(path, m.dump());
    return path;
  }
  MarkerCheck check(const std::string& path, const std::string& fp = "fp", int size = 2,
                    VerifyLevel level = VerifyLevel::kCheap) {
    return check_marker(path, dir_.string(), fp, size, level);
  }
  fs::path dir_;
};

TEST_F(MarkerTest, SealRecordsSizeAndHashes) {
  OutputRecord r = seal_output(dir_.string(), "shards/b");
  EXPECT_EQ(r.file, "shards/b");
  EXPECT_EQ(r.bytes, 5u);
  EXPECT_EQ(r.xxh3, xxh3_hex("small"));
  EXPECT_EQ(OutputRecord::from_json(r.to_json()).xxh3_ends, r.xxh3_ends);
}

TEST_F(MarkerTest, ValidMarkerMatchesEveryOutput) {
  auto path = write_marker(good_marker());
  EXPECT_TRUE(check(path).valid) << check(path).reason;
  EXPECT_TRUE(check(path, "fp", 2, VerifyLevel::kFull).valid);
}

TEST_F(MarkerTest, EachMismatchIsReported) {
  auto old = good_marker();
  old["format_version"] = 1;
  auto path = write_marker(good_marker());
  EXPECT_EQ(check(path, "other").reason, "configuration fingerprint differs");
  EXPECT_EQ(check(path, "fp", 3).reason, "world size differs");
  // Damage in the middle of a large output: only the full check reads it.
  std::string damaged(300000, 'x');
  damaged[150000] = 'y';
  write_shard("a", damaged);
  EXPECT_TRUE(check(path).valid);
  EXPECT_NE(check(path, "fp", 2, VerifyLevel::kFull).reason.find("XXH3"), std::string::npos);
  // Damage at an end, or a change of size, is caught by the cheap check too.
  damaged = std::string(300000, 'x');
  damaged[10] = 'y';
  write_shard("a", damaged);
  EXPECT_NE(check(path).reason.find("start or end"), std::string::npos) << check(path).reason;
  write_shard("a", std::string(299999, 'x'));
  EXPECT_NE(check(path).reason.find("bytes"), std::string::npos);
  write_shard("a", std::string(300000, 'x'));
  fs::remove(dir_ / "shards" / "b");
  EXPECT_NE(check(path).reason.find("missing"), std::string::npos);
  EXPECT_NE(check(path).reason.find("shards/b"), std::string::npos);
  EXPECT_EQ(check((dir_ / "nope.json").string()).reason, "marker missing");
  EXPECT_NE(check(write_marker(old)).reason.find("format version"), std::string::npos);
  atomic_write_file(path, "{ not json");
  EXPECT_FALSE(check(path).valid);
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

// Issue 28, item 12: a refusal says what differs and what to do.
TEST(PlanStage, ARefusalNamesTheOptionsThatDifferAndWhatToDo) {
  EXPECT_EQ(config_differences("index = Flat\nshards = 2\noverwrite = false\nname = \n",
                               "index = IVF4096,Flat\nshards = 2\noverwrite = true\nname = \n"
                               "seed = 1\n"),
            "--index IVF4096,Flat (was Flat), --seed 1 (was unset)");
  EXPECT_EQ(config_differences("a = 1\n", "a = 1\n"), "");
  nlohmann::json run = {{"config_fingerprint", "fp"}, {"world_size", 2}};
  try {
    plan_stage("RUN/ingest/vit/gen-00000", run, true, "other", 2, false,
               "--index IVF4096,Flat (was Flat)");
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("this run differs in --index IVF4096,Flat (was Flat)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("--name N"), std::string::npos) << what;
    EXPECT_NE(what.find("--overwrite"), std::string::npos) << what;
    EXPECT_EQ(what.find("fingerprint"), std::string::npos) << what;
  }
  try {
    plan_stage("RUN/patchgen", run, true, "fp", 3, false);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("is complete already, made with 2 ranks"),
              std::string::npos)
        << e.what();
  }
}

TEST(PrepareStage, FreshWritesRunFilesAndResumeKeepsOutputs) {
  auto dir = fs::temp_directory_path() / ("tessera_prepare_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SerialComm comm;
  StageOptions options;
  {
    auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 1\n", "fp", options);
    EXPECT_EQ(state.action, StageAction::kFresh);
    EXPECT_TRUE(state.lock.has_value());
    EXPECT_EQ(read_file((dir / "config.ini").string()), "a = 1\n");
    atomic_write_file((dir / "markers" / "rank-00000.json").string(), "{}");
  }
  {
    auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 1\n", "fp", options);
    EXPECT_EQ(state.action, StageAction::kResume);
    EXPECT_TRUE(fs::exists(dir / "markers" / "rank-00000.json"));
  }
  EXPECT_THROW(prepare_stage(comm, "patchgen", dir.string(), "a = 2\n", "fp2", options),
               InvalidInput);
  options.overwrite = true;
  auto state = prepare_stage(comm, "patchgen", dir.string(), "a = 2\n", "fp2", options);
  EXPECT_EQ(state.action, StageAction::kFresh);
  EXPECT_FALSE(fs::exists(dir / "markers"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
