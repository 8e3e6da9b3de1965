#include "common/mpi/comm.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(SerialComm, CollectivesAreIdentities) {
  SerialComm comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.allgather("abc"), std::vector<std::string>{"abc"});
  EXPECT_EQ(comm.broadcast("xyz", 0), "xyz");
  EXPECT_EQ(comm.allreduce_sum(int64_t{7}), 7);
  EXPECT_EQ(comm.allreduce_max(2.5), 2.5);
  EXPECT_EQ(comm.allreduce_sum(2.5), 2.5);
}

}  // namespace
}  // namespace tessera
