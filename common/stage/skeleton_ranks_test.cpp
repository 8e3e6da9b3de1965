// The stage skeleton at R = 1..4 ranks as threads (ThreadComm): markers per rank, resume per rank,
// and a rank failing in its work or rank 0 failing in finish ending every rank alike.
#include "common/stage/skeleton.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/thread_comm.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// A stage whose rank r writes out/rank-r.dat; shared by the rank threads (counters are atomic).
class RankWork final : public StageWork {
 public:
  std::optional<int> setup(Comm&, StageAction action) override {
    last_action = action;
    return std::nullopt;
  }
  RankResult rank_work(const RankContext& context) override {
    ++rank_works[context.rank];
    if (context.rank == failing_rank) throw IoError("rank work failed: disk full");
    const std::string file = "out/" + rank_file_name(context.rank, ".dat");
    atomic_write_file(context.staging_path(file), std::string(1000 + context.rank, 'x'));
    return {{file}, {{"rows", context.rank + 1}}};
  }
  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) override {
    ++finishes;
    if (comm.rank() == 0) {
      if (fail_finish) throw IoError("cannot write the index");
      int64_t rows = 0;
      for (const auto& m : markers) rows += m.at("rows").get<int64_t>();
      return {{"rows", rows}};
    }
    return {};
  }
  std::array<std::atomic<int>, 8> rank_works{};
  std::atomic<int> finishes{0};
  std::atomic<StageAction> last_action{StageAction::kFresh};
  int failing_rank = -1;
  bool fail_finish = false;
};

class SkeletonRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_skeleton_ranks_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    run_ = {"test", dir_.string(), "a = 1\n", "fp", {}, {{"part", 0}, {"parts", 1}}};
    run_.options.file_locking = false;  // fcntl locks belong to the process, not the rank thread
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::vector<RankOutcome> run(int ranks, RankWork& work) {
    return run_rank_outcomes(ranks, [&](Comm& comm) { return run_stage(comm, run_, work); });
  }

  fs::path dir_;
  StageRun run_;
};

std::vector<int> codes(const std::vector<RankOutcome>& outcomes) {
  std::vector<int> c;
  for (const auto& o : outcomes) c.push_back(o.exit_code);
  return c;
}

TEST_F(SkeletonRanks, EveryRankWritesItsMarkerAndRankZeroSeesThemAll) {
  for (int R = 1; R <= 4; ++R) {
    fs::remove_all(dir_);
    RankWork work;
    const auto outcomes = run(R, work);
    EXPECT_EQ(codes(outcomes), std::vector<int>(R, 0));
    for (int r = 0; r < R; ++r) {
      EXPECT_EQ(work.rank_works[r], 1);
      const auto marker = read_json_file(marker_path(dir_.string(), r));
      ASSERT_TRUE(marker) << "R=" << R << " rank " << r;
      EXPECT_EQ(marker->at("rows"), r + 1);
    }
    EXPECT_EQ(work.finishes, R) << "finish is collective";
    const auto success = read_json_file((dir_ / "_SUCCESS").string());
    ASSERT_TRUE(success);
    EXPECT_EQ(success->at("rows"), R * (R + 1) / 2);
    EXPECT_EQ(success->at("world_size"), R);
  }
}

// A rank whose work throws ends the job: the others, waiting in the barrier, are released with its
// exit code and nothing is marked complete. The rerun redoes only that rank's work.
TEST_F(SkeletonRanks, ARankFailingInItsWorkEndsEveryRankAndOnlyItIsRedone) {
  RankWork failing;
  failing.failing_rank = 1;
  const auto outcomes = run(3, failing);
  EXPECT_EQ(codes(outcomes), std::vector<int>(3, kExitError));
  for (const auto& o : outcomes) EXPECT_TRUE(o.error);
  EXPECT_FALSE(path_exists((dir_ / "_SUCCESS").string()));
  EXPECT_TRUE(path_exists(marker_path(dir_.string(), 0)));
  EXPECT_FALSE(path_exists(marker_path(dir_.string(), 1)));
  EXPECT_TRUE(path_exists(marker_path(dir_.string(), 2)));

  RankWork rerun;
  EXPECT_EQ(codes(run(3, rerun)), std::vector<int>(3, 0));
  EXPECT_EQ(rerun.last_action.load(), StageAction::kResume);
  EXPECT_EQ(rerun.rank_works[0], 0);
  EXPECT_EQ(rerun.rank_works[1], 1);
  EXPECT_EQ(rerun.rank_works[2], 0);
  EXPECT_TRUE(path_exists((dir_ / "_SUCCESS").string()));
}

TEST_F(SkeletonRanks, RankZeroFailingInFinishEndsEveryRank) {
  RankWork work;
  work.fail_finish = true;
  int first = -1;
  const auto outcomes =
      run_rank_outcomes(3, [&](Comm& comm) { return run_stage(comm, run_, work); }, &first);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(codes(outcomes), std::vector<int>(3, kExitError));
  EXPECT_FALSE(path_exists((dir_ / "_SUCCESS").string()));
}

TEST_F(SkeletonRanks, AnotherRankCountIsRefusedByEveryRankAlike) {
  RankWork first;
  ASSERT_EQ(codes(run(2, first)), std::vector<int>(2, 0));
  fs::remove(dir_ / "_SUCCESS");
  RankWork other;
  const auto outcomes = run(3, other);
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.exit_code, kExitBadInput);
    bool invalid = false;
    try {
      std::rethrow_exception(o.error);
    } catch (const InvalidInput&) {
      invalid = true;
    } catch (...) {
    }
    EXPECT_TRUE(invalid) << "every rank throws rank 0's InvalidInput itself";
  }
}

}  // namespace
}  // namespace tessera
