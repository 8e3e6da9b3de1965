// The stage skeleton driven in-process with the serial communicator and a stage that records
// what it was asked to do.
#include "common/stage/skeleton.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/failure.h"
#include "common/stage/lineage.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class RecordingWork final : public StageWork {
 public:
  explicit RecordingWork(std::string dir) : dir_(std::move(dir)) {}
  std::optional<int> setup(Comm&, StageAction action) override {
    ++setups;
    last_action = action;
    if (!setup_error.empty()) fail<InvalidInput>("{}", setup_error);
    return early_exit;
  }
  RankResult rank_work(const RankContext& context) override {
    ++rank_works;
    EXPECT_EQ(context.world_size, 1);
    const std::string a = "out/" + rank_file_name(context.rank, ".a");
    const std::string b = "out/" + rank_file_name(context.rank, ".b");
    atomic_write_file(context.staging_path(a), std::string(200000, 'a'));
    atomic_write_file(context.staging_path(b), "bb");
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
  std::string setup_error;  // thrown by setup as InvalidInput when not empty
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

// A failure after the directory is taken is recorded there with its exit code (tessera-status
// shows it); the next attempt removes it, and a refusal before the directory is taken records
// nothing.
TEST_F(SkeletonTest, AFailureIsRecordedUntilTheNextAttempt) {
  RecordingWork failing(dir_.string());
  failing.setup_error = "index needs 4096 training vectors";
  EXPECT_THROW(run_stage(comm_, run_, failing), InvalidInput);
  auto failures = read_failures(dir_.string(), 1);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rank, 0);
  EXPECT_EQ(failures[0].exit_code, kExitBadInput);
  EXPECT_EQ(failures[0].message, "index needs 4096 training vectors");
  EXPECT_FALSE(failures[0].time.empty());

  RecordingWork fixed(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, fixed), 0);
  EXPECT_TRUE(read_failures(dir_.string(), 1).empty());
  EXPECT_FALSE(fs::exists(dir_ / kFailureDir));

  run_.fingerprint = "other";  // refused: the directory is another configuration's
  RecordingWork refused(dir_.string());
  EXPECT_THROW(run_stage(comm_, run_, refused), InvalidInput);
  EXPECT_TRUE(read_failures(dir_.string(), 1).empty());
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

// A rank that is not the lock holder sees its job holding the directory only while the lock is
// held and records its job's token: not once rank 0 is gone, nor after another job took over.
TEST_F(SkeletonTest, JobHoldsRunOnlyWhileItsRankZeroHoldsTheLock) {
  fs::create_directories(dir_);
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // rank 0 of job "A"
    auto lock = FileLock::try_acquire((dir_ / ".lock").string(), nullptr,
                                      FileLock::Mode::kExclusive, {{"job", "A"}});
    char c = lock ? '1' : '0';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    std::_Exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, '1');
  EXPECT_TRUE(job_holds_run(dir_.string(), "A", /*lock_holder=*/false));
  EXPECT_FALSE(job_holds_run(dir_.string(), "B", /*lock_holder=*/false));
  (void)!::write(done[1], &c, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(job_holds_run(dir_.string(), "A", /*lock_holder=*/false));
}

// Replacing a run marks every stage directory made from it stale, as far down the stage graph
// as it reaches (patchgen -> embed -> ingest); they refuse to serve as input and start afresh
// when rerun. Directories made from other inputs are left alone.
TEST_F(SkeletonTest, OverwriteMarksEveryDownstreamStageStale) {
  const fs::path root = dir_ / "RUN";
  const RunLayout layout(root.string());
  const std::string patchgen = layout.stage_dir(kPatchgenStage, "", 0, 1);
  const std::string embed_a = layout.stage_dir(kEmbedStage, "a", 0, 1);
  const std::string embed_b = layout.stage_dir(kEmbedStage, "b", 0, 1);
  const std::string ingest_a = layout.stage_dir(kIngestStage, "a", 0, 1);
  const std::string ingest_b = layout.stage_dir(kIngestStage, "b", 0, 1);
  auto stage = [&](const char* name, const std::string& dir, std::vector<std::string> inputs) {
    return StageRun{name, dir, "", std::string("fp-") + name, {}, {}, {root.string(), inputs}};
  };
  StageRun pg = stage(kPatchgenStage, patchgen, {});
  const StageRun ea = stage(kEmbedStage, embed_a, {patchgen});
  const StageRun eb = stage(kEmbedStage, embed_b, {patchgen});
  const StageRun ia = stage(kIngestStage, ingest_a, {embed_a, patchgen});
  const StageRun ib = stage(kIngestStage, ingest_b, {embed_b, patchgen});
  for (const StageRun* r : std::vector<const StageRun*>{&pg, &ea, &eb, &ia, &ib}) {
    RecordingWork work(r->dir);
    ASSERT_EQ(run_stage(comm_, *r, work), 0) << r->dir;
  }
  EXPECT_NO_THROW(check_stage_input(comm_, embed_a, VerifyLevel::kCheap));

  // embed --overwrite of tag a: its index is stale, tag b and its index are not.
  StageRun ea2 = ea;
  ea2.fingerprint = "fp-embed-replaced";
  ea2.options.overwrite = true;
  RecordingWork replaced(embed_a);
  ASSERT_EQ(run_stage(comm_, ea2, replaced), 0);
  EXPECT_TRUE(fs::exists(fs::path(ingest_a) / kStaleFile));
  EXPECT_FALSE(fs::exists(fs::path(ingest_b) / kStaleFile));
  EXPECT_FALSE(fs::exists(fs::path(embed_b) / kStaleFile));
  EXPECT_NE(stale_reason(ingest_a), "");
  EXPECT_EQ(stale_reason(ingest_b), "");
  EXPECT_THROW(check_stage_input(comm_, ingest_a, VerifyLevel::kCheap), InvalidInput);

  // patchgen --overwrite: every embed and ingest directory is stale, ingest b through embed b.
  pg.fingerprint = "fp-patchgen-replaced";
  pg.options.overwrite = true;
  RecordingWork pg2(patchgen);
  ASSERT_EQ(run_stage(comm_, pg, pg2), 0);
  for (const auto& dir : {embed_a, embed_b, ingest_a, ingest_b}) {
    EXPECT_TRUE(fs::exists(fs::path(dir) / kStaleFile)) << dir;
    EXPECT_THROW(check_stage_input(comm_, dir, VerifyLevel::kCheap), InvalidInput) << dir;
  }
  // A stale directory starts afresh when rerun, without --overwrite.
  RecordingWork redo(embed_b);
  EXPECT_EQ(run_stage(comm_, eb, redo), 0);
  EXPECT_EQ(redo.rank_works, 1);
  EXPECT_FALSE(fs::exists(fs::path(embed_b) / kStaleFile));
  EXPECT_EQ(stale_reason(embed_b), "");

  // aggregate --overwrite: the slide index built on it (ingest --level slide, a stage directory
  // at its name's root) is marked stale.
  const std::string slides = layout.stage_dir("aggregate", "mean-b", 0, 1);
  const std::string slide_index = layout.stage_root(kIngestStage, "slides-b");
  StageRun ag = stage("aggregate", slides, {embed_b, patchgen});
  const StageRun si = stage(kIngestStage, slide_index, {slides});
  for (const StageRun* r : std::vector<const StageRun*>{&ag, &si}) {
    RecordingWork work(r->dir);
    ASSERT_EQ(run_stage(comm_, *r, work), 0) << r->dir;
  }
  ag.fingerprint = "fp-aggregate-replaced";
  ag.options.overwrite = true;
  RecordingWork ag2(slides);
  ASSERT_EQ(run_stage(comm_, ag, ag2), 0);
  EXPECT_TRUE(fs::exists(fs::path(slide_index) / kStaleFile));
  EXPECT_NE(stale_reason(slide_index), "");
}

// An input changed without any marking (a folder swapped in by hand, a rerun with file locking
// off from elsewhere) is found by the lineage recorded in run.json.
TEST_F(SkeletonTest, AnInputChangedBehindItsBackIsFoundOnUse) {
  const fs::path root = dir_ / "RUN";
  const RunLayout layout(root.string());
  const std::string patchgen = layout.stage_dir(kPatchgenStage, "", 0, 1);
  const std::string embed = layout.stage_dir(kEmbedStage, "t", 0, 1);
  StageRun pg{kPatchgenStage, patchgen, "", "fp", {}, {}, {root.string(), {}}};
  StageRun em{kEmbedStage, embed, "", "fe", {}, {}, {root.string(), {patchgen}}};
  RecordingWork w1(patchgen), w2(embed);
  ASSERT_EQ(run_stage(comm_, pg, w1), 0);
  ASSERT_EQ(run_stage(comm_, em, w2), 0);
  EXPECT_EQ(stale_reason(embed), "");
  // Another complete patch run is swapped in: same layout, another _SUCCESS.
  const std::string success = (fs::path(patchgen) / kSuccessFile).string();
  std::string text = read_file(success);
  text.insert(text.find('{') + 1, "\"swapped\": true, ");
  atomic_write_file(success, text);
  EXPECT_NE(stale_reason(embed).find("rerun or replaced"), std::string::npos) << stale_reason(embed);
  EXPECT_THROW(check_stage_input(comm_, embed, VerifyLevel::kCheap), InvalidInput);
  // Rerunning the embed stage starts it afresh (no --overwrite needed) and records the new input.
  RecordingWork w3(embed);
  EXPECT_EQ(run_stage(comm_, em, w3), 0);
  EXPECT_EQ(w3.last_action, StageAction::kFresh);
  EXPECT_EQ(stale_reason(embed), "");
}

// Files a stage writes in finish() are sealed into _SUCCESS and checked by its readers: a damaged
// consolidated file fails the input check, and --verify full on the complete stage redoes it.
TEST_F(SkeletonTest, FinishOutputsAreSealedAndChecked) {
  class ConsolidatingWork final : public StageWork {
   public:
    explicit ConsolidatingWork(std::string dir) : dir_(std::move(dir)) {}
    std::optional<int> setup(Comm&, StageAction) override { return std::nullopt; }
    RankResult rank_work(const RankContext& context) override {
      atomic_write_file(context.staging_path("part.bin"), "rank data");
      return {{"part.bin"}, nlohmann::json::object()};
    }
    nlohmann::json finish(Comm&, const std::vector<nlohmann::json>&) override {
      ++finishes;
      atomic_write_file((fs::path(dir_) / "index.h5").string(), std::string(300000, 'i'));
      return {{"outputs", {"index.h5"}}};
    }
    int finishes = 0;

   private:
    std::string dir_;
  };
  ConsolidatingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  const auto success = read_json_file((dir_ / kSuccessFile).string());
  ASSERT_TRUE(success);
  ASSERT_EQ(success->at("outputs").size(), 1u);
  EXPECT_EQ(success->at("outputs")[0].at("file"), "index.h5");
  EXPECT_NO_THROW(check_stage_input(comm_, dir_.string(), VerifyLevel::kFull));
  // One byte changed in the middle: only a full check sees it.
  {
    std::string bytes = read_file((dir_ / "index.h5").string());
    bytes[150000] = 'X';
    atomic_write_file((dir_ / "index.h5").string(), bytes);
  }
  EXPECT_NO_THROW(check_stage_input(comm_, dir_.string(), VerifyLevel::kCheap));
  EXPECT_THROW(check_stage_input(comm_, dir_.string(), VerifyLevel::kFull), IoError);
  run_.options.verify = VerifyLevel::kFull;
  ConsolidatingWork again(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, again), 0);
  EXPECT_EQ(again.finishes, 1);
  EXPECT_NO_THROW(check_stage_input(comm_, dir_.string(), VerifyLevel::kFull));
}

// A reader holds its input shared: a writer of that directory is refused meanwhile.
TEST_F(SkeletonTest, AnInputBeingReadCannotBeReplaced) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  // The lock registry is per process, so the reader's lock is taken in a child process.
  const pid_t child = ::fork();
  if (child == 0) {
    SerialComm comm;
    auto held = hold_input(comm, dir_.string(), run_.options);
    ::sleep(3);
    std::_Exit(0);
  }
  ::usleep(500000);
  run_.options.overwrite = true;
  RecordingWork writer(dir_.string());
  EXPECT_THROW(run_stage(comm_, run_, writer), InvalidInput);
  int status = 0;
  ::waitpid(child, &status, 0);
  RecordingWork after(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, after), 0);
}

// A stage that needs every part refuses with the list of those that are not complete.
TEST_F(SkeletonTest, AllPartsAreRequiredAndTheMissingOnesListed) {
  const std::string root = dir_.string();
  for (int p : {0, 2}) {
    StageRun part = run_;
    part.dir = part_dir(root, p, 3);
    RecordingWork work(part.dir);
    ASSERT_EQ(run_stage(comm_, part, work), 0);
  }
  EXPECT_EQ(incomplete_parts(root, 3), std::vector<std::string>{part_dir(root, 1, 3)});
  try {
    require_all_parts(root, 3);
    FAIL() << "an incomplete part was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("part-00001-of-00003"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("part-00000-of-00003"), std::string::npos) << e.what();
  }
  StageRun part = run_;
  part.dir = part_dir(root, 1, 3);
  RecordingWork work(part.dir);
  ASSERT_EQ(run_stage(comm_, part, work), 0);
  EXPECT_NO_THROW(require_all_parts(root, 3));
  atomic_write_file(part_dir(root, 2, 3) + "/_STALE", "{}");
  EXPECT_EQ(incomplete_parts(root, 3), std::vector<std::string>{part_dir(root, 2, 3)});
}

// Issue 21, case 21: a resumed run removes what killed jobs left staged, and nothing else.
TEST_F(SkeletonTest, ResumeRemovesTheTemporariesOfDeadJobs) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  fs::remove(dir_ / "_SUCCESS");
  const std::vector<std::string> dead = {"out/rank-00000.a.tmp.0123456789abcdef",
                                         "out/shard-00001.h5.tmp.fedcba9876543210",
                                         "plans/s1.h5.tmp", "out/_SUCCESS.tmp.node-7.local.4242"};
  const std::vector<std::string> kept = {"out/s.tmp.h5", "out/notes.txt", "out/a.tmp.x",
                                         "part-00000-of-00002/z.h5.tmp"};
  for (const auto& f : dead) atomic_write_file((dir_ / f).string(), std::string(100, 'x'));
  for (const auto& f : kept) atomic_write_file((dir_ / f).string(), "k");
  atomic_write_file((dir_ / "part-00000-of-00002" / kLockFile).string(), "");  // another stage dir
  RecordingWork resumed(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, resumed), 0);
  EXPECT_EQ(resumed.last_action, StageAction::kResume);
  for (const auto& f : dead) EXPECT_FALSE(fs::exists(dir_ / f)) << f;
  for (const auto& f : kept) EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  EXPECT_TRUE(fs::exists(dir_ / "out/rank-00000.a"));
}

// A _SUCCESS that does not parse (a flipped byte) is finished again, not an error on every rerun.
TEST_F(SkeletonTest, DamagedSuccessIsRewrittenByARerun) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  atomic_write_file((dir_ / "_SUCCESS").string(), "{\"stage\": \"t\xe9st\"}");
  RecordingWork again(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, again), 0);
  EXPECT_EQ(again.last_action, StageAction::kResume);
  EXPECT_EQ(again.rank_works, 0);
  EXPECT_EQ(again.finishes, 1);
  EXPECT_EQ(read_json_file((dir_ / "_SUCCESS").string())->at("things"), 3);
}

// A complete stage whose finish wrote something outside its directory that is gone (ingest's
// catalog.json) runs its finish again when the stage says why.
TEST_F(SkeletonTest, CompleteStageIsFinishedAgainWhenTheStageSaysWhy) {
  RecordingWork first(dir_.string());
  ASSERT_EQ(run_stage(comm_, run_, first), 0);
  int asked = 0;
  run_.refinish_reason = [&] {
    ++asked;
    return std::string(asked == 1 ? "the catalog is gone" : "");
  };
  RecordingWork again(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, again), 0);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(again.rank_works, 0);
  EXPECT_EQ(again.finishes, 1);
  RecordingWork third(dir_.string());
  EXPECT_EQ(run_stage(comm_, run_, third), 0);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(third.setups + third.rank_works + third.finishes, 0);
}

TEST(PartDir, OnePartIsTheRootItself) {
  EXPECT_EQ(part_dir("RUN/patchgen", 0, 1), "RUN/patchgen");
  EXPECT_EQ(part_dir("RUN/patchgen", 3, 12), "RUN/patchgen/part-00003-of-00012");
}

}  // namespace
}  // namespace tessera
