#include <gtest/gtest.h>

#include "common/mpi/mpi_comm.h"

namespace tessera {
namespace {

TEST(MpiComm, AllgatherCollectsEveryRankInOrder) {
  MpiComm comm(MPI_COMM_WORLD);
  // Rank r contributes r+1 copies of the letter 'a'+r, including an empty string on no rank.
  std::string mine(static_cast<size_t>(comm.rank() + 1), static_cast<char>('a' + comm.rank()));
  auto all = comm.allgather(mine);
  ASSERT_EQ(static_cast<int>(all.size()), comm.size());
  for (int r = 0; r < comm.size(); ++r) {
    EXPECT_EQ(all[r], std::string(static_cast<size_t>(r + 1), static_cast<char>('a' + r)));
  }
}

TEST(MpiComm, BroadcastAndReductions) {
  MpiComm comm(MPI_COMM_WORLD);
  std::string root_text = comm.rank() == 0 ? std::string(100000, 'z') : std::string("ignored");
  EXPECT_EQ(comm.broadcast(root_text, 0), std::string(100000, 'z'));
  int64_t n = comm.size();
  EXPECT_EQ(comm.allreduce_sum(int64_t{comm.rank()}), n * (n - 1) / 2);
  EXPECT_EQ(comm.allreduce_max(int64_t{comm.rank()}), n - 1);
  EXPECT_DOUBLE_EQ(comm.allreduce_max(0.5 * comm.rank()), 0.5 * static_cast<double>(n - 1));
  EXPECT_DOUBLE_EQ(comm.allreduce_sum(0.5 * comm.rank()), 0.25 * static_cast<double>(n * (n - 1)));
  std::vector<int64_t> values = {comm.rank(), 1, 0};
  comm.allreduce_sum(values);
  EXPECT_EQ(values, (std::vector<int64_t>{n * (n - 1) / 2, n, 0}));
  comm.barrier();
  EXPECT_GE(comm.local_rank(), 0);
  EXPECT_LT(comm.local_rank(), comm.size());
}

}  // namespace
}  // namespace tessera
