#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

// SerialComm stands for a one-rank MPI job (stages run under it without mpirun): each collective
// must give what MPI gives on a communicator of one rank, here MPI_COMM_SELF of every rank.
TEST(SerialComm, GivesWhatAOneRankMpiJobGives) {
  MpiComm self(MPI_COMM_SELF);
  SerialComm serial;
  EXPECT_EQ(serial.rank(), self.rank());
  EXPECT_EQ(serial.size(), self.size());
  EXPECT_EQ(serial.local_rank(), self.local_rank());
  for (const std::string& bytes :
       {std::string(), std::string("abc"), std::string("\0x\xff\0", 4), std::string(70000, 'q')}) {
    EXPECT_EQ(serial.allgather(bytes), self.allgather(bytes));
    EXPECT_EQ(serial.broadcast(bytes, 0), self.broadcast(bytes, 0));
  }
  for (const int64_t v : {int64_t{0}, int64_t{-7}, std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(serial.allreduce_sum(v), self.allreduce_sum(v));
    EXPECT_EQ(serial.allreduce_max(v), self.allreduce_max(v));
  }
  for (const double v : {0.0, -2.5, 1e300, std::numeric_limits<double>::denorm_min()}) {
    EXPECT_EQ(serial.allreduce_sum(v), self.allreduce_sum(v));
    EXPECT_EQ(serial.allreduce_max(v), self.allreduce_max(v));
  }
  EXPECT_TRUE(std::isnan(serial.allreduce_sum(std::nan(""))));
  std::vector<int64_t> a = {3, -1, 0, 1LL << 40}, b = a, none, none_too;
  serial.allreduce_sum(a);
  self.allreduce_sum(b);
  EXPECT_EQ(a, b);
  serial.allreduce_sum(none);
  self.allreduce_sum(none_too);
  EXPECT_EQ(none, none_too);
  serial.barrier();
  self.barrier();
}

}  // namespace
}  // namespace tessera
