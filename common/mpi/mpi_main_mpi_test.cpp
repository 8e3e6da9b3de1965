#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/mpi/mpi_comm.h"
#include "common/mpi/mpi_main.h"

namespace tessera {
namespace {

TEST(AgreeOnFailure, EveryRankThrowsTheLowestFailingRanksError) {
  MpiComm comm(MPI_COMM_WORLD);
  EXPECT_NO_THROW(agree_on_failure(comm, [] {}));

  // Only the last rank fails (with two lines in its message): every rank throws its error.
  const int last = comm.size() - 1;
  try {
    agree_on_failure(comm, [&] {
      if (comm.rank() == last) throw InvalidInput("invalid --parts\nsecond line");
    });
    ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()),
              last == 0 ? "invalid --parts\nsecond line"
                        : fmt::format("rank {}: invalid --parts\nsecond line", last));
  }

  // Every rank fails with its own code: rank 0's failure wins everywhere.
  try {
    agree_on_failure(comm, [&] { throw Error(fmt::format("r{}", comm.rank()), 10 + comm.rank()); });
    ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 10);
    EXPECT_STREQ(e.what(), "r0");
  }
}

}  // namespace
}  // namespace tessera
