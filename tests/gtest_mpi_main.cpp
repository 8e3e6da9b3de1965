// The gtest main of MPI test executables (run under mpirun by CTest): initialises MPI, prints
// results from rank 0 only, and makes the exit code reflect failures on any rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <spdlog/spdlog.h>

#include "common/h5/h5.h"
#include "common/mpi/mpi_main.h"

int main(int argc, char** argv) {
  tessera::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  spdlog::set_level(spdlog::level::warn);
  tessera::h5::init();
  int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}
