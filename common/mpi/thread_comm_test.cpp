#include "common/mpi/thread_comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "common/core/error.h"
#include "common/mpi/mpi_main.h"

namespace tessera {
namespace {

ThreadComm& thread_comm(Comm& comm) { return dynamic_cast<ThreadComm&>(comm); }

// Spins (yielding) until `ready` holds.
template <typename F>
void wait_until(F ready) {
  while (!ready()) std::this_thread::yield();
}

// The message of what a rank threw, "" when it returned.
std::string message_of(const RankOutcome& o) {
  if (!o.error) return "";
  try {
    std::rethrow_exception(o.error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

bool threw_comm_aborted(const RankOutcome& o) {
  if (!o.error) return false;
  try {
    std::rethrow_exception(o.error);
  } catch (const CommAborted&) {
    return true;
  } catch (...) {
    return false;
  }
}

class ThreadCommSizes : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCommSizes, EveryCollectiveCombinesEveryRank) {
  const int R = GetParam();
  const std::vector<int> codes = run_ranks(R, [R](Comm& comm) {
    const int r = comm.rank();
    EXPECT_EQ(comm.size(), R);
    EXPECT_EQ(comm.local_rank(), r);
    comm.barrier();
    // Payloads of different lengths per rank, the empty one included.
    const auto all = comm.allgather(std::string(static_cast<size_t>(r), 'a' + r));
    EXPECT_EQ(all.size(), static_cast<size_t>(R));
    for (int s = 0; s < R; ++s) EXPECT_EQ(all[s], std::string(static_cast<size_t>(s), 'a' + s));
    for (int root = 0; root < R; ++root) {
      EXPECT_EQ(comm.broadcast(r == root ? "from " + std::to_string(root) : "ignored", root),
                "from " + std::to_string(root));
    }
    EXPECT_EQ(comm.allreduce_sum(int64_t{r + 1}), int64_t{R} * (R + 1) / 2);
    EXPECT_EQ(comm.allreduce_max(int64_t{-r}), 0);
    EXPECT_EQ(comm.allreduce_sum(0.5 * r), 0.25 * R * (R - 1));
    EXPECT_EQ(comm.allreduce_max(1.5 * r), 1.5 * (R - 1));
    std::vector<int64_t> v = {1, r, -2 * r};
    comm.allreduce_sum(v);
    EXPECT_EQ(v, (std::vector<int64_t>{R, R * (R - 1) / 2, -R * (R - 1)}));
    std::vector<int64_t> empty;
    comm.allreduce_sum(empty);
    EXPECT_TRUE(empty.empty());
    EXPECT_GE(timed_barrier(comm), 0.0);
    return 10 + r;
  });
  ASSERT_EQ(codes.size(), static_cast<size_t>(R));
  for (int r = 0; r < R; ++r) EXPECT_EQ(codes[r], 10 + r);
}

// Many rounds back to back, fast ranks re-entering while slow ones still read the last result.
TEST_P(ThreadCommSizes, ManyRoundsKeepTheirResultsApart) {
  const int R = GetParam();
  run_ranks(R, [R](Comm& comm) {
    for (int round = 0; round < 300; ++round) {
      const std::string mine = std::to_string(round * 100 + comm.rank());
      const auto all = comm.allgather(mine);
      for (int s = 0; s < R; ++s) {
        if (all[s] != std::to_string(round * 100 + s)) {
          ADD_FAILURE() << "round " << round << " rank " << s << ": " << all[s];
          return 1;
        }
      }
      if (comm.allreduce_sum(int64_t{round}) != int64_t{round} * R) {
        ADD_FAILURE() << "round " << round;
        return 1;
      }
    }
    return 0;
  });
}

TEST_P(ThreadCommSizes, DecidedByRootGivesEveryRankTheResultOrTheErrorKind) {
  const int R = GetParam();
  run_ranks(R, [](Comm& comm) {
    EXPECT_EQ(decided_by_root(comm, [&] { return std::string("plan of rank ") +
                                                 std::to_string(comm.rank()); }),
              "plan of rank 0");
    EXPECT_THROW(decided_by_root(comm, []() -> std::string { throw InvalidInput("bad"); }),
                 InvalidInput);
    try {
      decided_by_root(comm, []() -> std::string { throw IoError("disk full"); });
      ADD_FAILURE() << "no exception on rank " << comm.rank();
    } catch (const InvalidInput&) {
      ADD_FAILURE() << "an I/O error became bad input";
    } catch (const IoError& e) {
      EXPECT_STREQ(e.what(), "disk full");
    }
    return 0;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadCommSizes, ::testing::Values(1, 2, 3, 4, 7));

TEST(ThreadComm, AGroupNeedsARank) {
  EXPECT_THROW(ThreadComm::group(0), InvalidInput);
  EXPECT_THROW(run_ranks(-1, [](Comm&) { return 0; }), InvalidInput);
}

// Rank 1 throws while ranks 0 and 2 are known to wait in a barrier: they are released with the
// failing rank's exit code, and the caller gets rank 1's exception with its type.
TEST(ThreadComm, ARankThrowingMidCollectiveReleasesTheOthers) {
  auto body = [](Comm& comm) -> int {
    comm.allgather("warm-up");
    if (comm.rank() == 1) {
      wait_until([&] { return thread_comm(comm).waiting() == 2; });
      throw InvalidInput("slide 'x' is not a slide");
    }
    comm.barrier();
    ADD_FAILURE() << "rank " << comm.rank() << " passed a barrier rank 1 never entered";
    return 0;
  };
  try {
    run_ranks(3, body);
    ADD_FAILURE() << "no exception";
  } catch (const CommAborted& e) {
    ADD_FAILURE() << "the caller got another rank's release, not the cause: " << e.what();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "slide 'x' is not a slide");
  }
  int first = -2;
  const auto outcomes = run_rank_outcomes(3, body, &first);
  EXPECT_EQ(first, 1);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].exit_code, kExitBadInput) << "rank " << r;
    ASSERT_TRUE(outcomes[r].error) << "rank " << r;
  }
  EXPECT_FALSE(threw_comm_aborted(outcomes[1]));
  for (int r : {0, 2}) {
    EXPECT_TRUE(threw_comm_aborted(outcomes[r])) << message_of(outcomes[r]);
    EXPECT_EQ(message_of(outcomes[r]), "rank 1 failed: slide 'x' is not a slide");
  }
}

// The other order: rank 0 fails first, the others enter their collective afterwards.
TEST(ThreadComm, CollectivesEnteredAfterAFailureThrowAtOnce) {
  int first = -2;
  const auto outcomes = run_rank_outcomes(
      4,
      [](Comm& comm) -> int {
        if (comm.rank() == 0) throw IoError("cannot write 'shard-00000.h5': No space left");
        wait_until([&] { return thread_comm(comm).poisoned_by() >= 0; });
        comm.broadcast("x", 0);
        return 0;
      },
      &first);
  EXPECT_EQ(first, 0);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(outcomes[r].exit_code, kExitError) << "rank " << r;
  for (int r = 1; r < 4; ++r) {
    EXPECT_TRUE(threw_comm_aborted(outcomes[r]));
    EXPECT_EQ(message_of(outcomes[r]),
              "rank 0 failed: cannot write 'shard-00000.h5': No space left");
  }
}

TEST(ThreadComm, AnExceptionOutsideTheHierarchyKeepsItsTypeAndExitsOne) {
  EXPECT_THROW(run_ranks(2,
                         [](Comm& comm) -> int {
                           if (comm.rank() == 1) throw std::out_of_range("vector::at");
                           comm.barrier();
                           return 0;
                         }),
               std::out_of_range);
  const auto outcomes = run_rank_outcomes(2, [](Comm& comm) -> int {
    if (comm.rank() == 1) throw 42;  // not even a std::exception
    comm.barrier();
    return 0;
  });
  EXPECT_EQ(outcomes[0].exit_code, kExitError);
  EXPECT_EQ(outcomes[1].exit_code, kExitError);
  EXPECT_TRUE(threw_comm_aborted(outcomes[0]));
}

TEST(ThreadComm, AbortEndsEveryRankWithItsCode) {
  try {
    run_ranks(3, [](Comm& comm) -> int {
      if (comm.rank() == 2) comm.abort(kExitSlidesFailed);
      comm.allreduce_sum(int64_t{1});
      return 0;
    });
    ADD_FAILURE() << "no exception";
  } catch (const CommAborted& e) {
    EXPECT_EQ(e.exit_code(), kExitSlidesFailed);
    EXPECT_STREQ(e.what(), "rank 2 called abort(3)");
  }
  int first = -2;
  const auto outcomes = run_rank_outcomes(
      3,
      [](Comm& comm) -> int {
        if (comm.rank() == 2) comm.abort(kExitSlidesFailed);
        comm.allreduce_sum(int64_t{1});
        return 0;
      },
      &first);
  EXPECT_EQ(first, 2);
  for (const auto& o : outcomes) EXPECT_EQ(o.exit_code, kExitSlidesFailed);
}

// A rank that returns while the others wait for it would hang an MPI job: here they fail.
TEST(ThreadComm, ARankReturningEarlyFailsTheRanksWaitingForIt) {
  int first = -2;
  const auto outcomes = run_rank_outcomes(
      3,
      [](Comm& comm) -> int {
        comm.barrier();
        if (comm.rank() == 2) return 0;
        comm.barrier();
        return 0;
      },
      &first);
  EXPECT_FALSE(outcomes[2].error);
  EXPECT_TRUE(first == 0 || first == 1) << first;
  for (int r : {0, 1}) {
    EXPECT_TRUE(threw_comm_aborted(outcomes[r])) << "rank " << r;
    EXPECT_NE(message_of(outcomes[r]).find("rank 2 returned"), std::string::npos)
        << message_of(outcomes[r]);
  }
  EXPECT_THROW(run_ranks(2,
                         [](Comm& comm) -> int {
                           if (comm.rank() == 0) return 0;
                           comm.barrier();
                           return 0;
                         }),
               CommAborted);
}

TEST(ThreadComm, MismatchedCollectivesFailInsteadOfMixingData) {
  // Different operations.
  EXPECT_THROW(run_ranks(2,
                         [](Comm& comm) -> int {
                           if (comm.rank() == 0) {
                             comm.broadcast("x", 0);
                           } else {
                             comm.allgather("y");
                           }
                           return 0;
                         }),
               CommAborted);
  // Different roots.
  EXPECT_THROW(run_ranks(3, [](Comm& comm) -> int {
                 comm.broadcast("x", comm.rank() == 2 ? 1 : 0);
                 return 0;
               }),
               CommAborted);
  // A root outside the job.
  EXPECT_THROW(run_ranks(2, [](Comm& comm) -> int {
                 comm.broadcast("x", 2);
                 return 0;
               }),
               CommAborted);
  // Vectors of different lengths.
  try {
    run_ranks(2, [](Comm& comm) -> int {
      std::vector<int64_t> v(static_cast<size_t>(3 + comm.rank()), 1);
      comm.allreduce_sum(v);
      return 0;
    });
    ADD_FAILURE() << "no exception";
  } catch (const CommAborted& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce_sum(int64[4])"), std::string::npos)
        << e.what();
  }
}

// The job's poison is per group: a new run is unaffected by an earlier failed one.
TEST(ThreadComm, GroupsAreIndependent) {
  EXPECT_THROW(run_ranks(2,
                         [](Comm& comm) -> int {
                           if (comm.rank() == 0) throw IoError("first job");
                           comm.barrier();
                           return 0;
                         }),
               IoError);
  EXPECT_EQ(run_ranks(2, [](Comm& comm) { return static_cast<int>(comm.allreduce_sum(int64_t{1})); }),
            (std::vector<int>{2, 2}));
}

}  // namespace
}  // namespace tessera
