#include "common/mpi/mpi_main.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include "common/core/error.h"

namespace tessera {
namespace {

TEST(MpiMain, ThreadLevelBelowFunneledIsRefused) {
  try {
    check_thread_level(MPI_THREAD_SINGLE);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitError);
    EXPECT_NE(std::string(e.what()).find("MPI_THREAD_SINGLE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MPI_THREAD_FUNNELED"), std::string::npos) << e.what();
  }
  for (int level : {MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE}) {
    EXPECT_NO_THROW(check_thread_level(level));
  }
}

TEST(MpiMain, AgreeOnFailureWithOneRank) {
  SerialComm comm;
  EXPECT_FALSE(agree_on_failure(comm, std::nullopt).has_value());
  const auto failure = agree_on_failure(comm, RankFailure{kExitBadInput, "invalid --stride"});
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->exit_code, kExitBadInput);
  EXPECT_EQ(failure->message, "invalid --stride");
}

}  // namespace
}  // namespace tessera
