#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/mpi/mpi_comm.h"
#include "common/mpi/mpi_main.h"

namespace tessera {
namespace {

TEST(AgreeOnFailure, EveryRankLearnsTheLowestFailingRank) {
  MpiComm comm(MPI_COMM_WORLD);
  EXPECT_FALSE(agree_on_failure(comm, std::nullopt).has_value());

  // Only the last rank fails (with two lines in its message): every rank gets its outcome.
  const int last = comm.size() - 1;
  std::optional<RankFailure> mine;
  if (comm.rank() == last) mine = RankFailure{kExitBadInput, "invalid --parts\nsecond line"};
  auto agreed = agree_on_failure(comm, mine);
  ASSERT_TRUE(agreed.has_value());
  EXPECT_EQ(agreed->exit_code, kExitBadInput);
  EXPECT_EQ(agreed->message, last == 0 ? "invalid --parts\nsecond line"
                                       : fmt::format("rank {}: invalid --parts\nsecond line", last));

  // Every rank fails with its own code: rank 0's failure wins everywhere.
  agreed = agree_on_failure(comm, RankFailure{10 + comm.rank(), fmt::format("r{}", comm.rank())});
  ASSERT_TRUE(agreed.has_value());
  EXPECT_EQ(agreed->exit_code, 10);
  EXPECT_EQ(agreed->message, "r0");
}

}  // namespace
}  // namespace tessera
