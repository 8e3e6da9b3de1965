#include "common/mpi/mpi_main.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <string>

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

TEST(MpiMain, ALauncherIsRecognisedByItsEnvironment) {
  const auto only = [](std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  EXPECT_FALSE(started_by_mpi_launcher(only({})));
  EXPECT_FALSE(started_by_mpi_launcher(only({{"HOME", "/root"}, {"SLURM_JOB_ID", "7"}})));
  EXPECT_TRUE(started_by_mpi_launcher(only({{"OMPI_COMM_WORLD_SIZE", "1"}})));  // mpirun -np 1
  EXPECT_TRUE(started_by_mpi_launcher(only({{"PMIX_RANK", "0"}})));             // srun --mpi=pmix
  EXPECT_TRUE(started_by_mpi_launcher(only({{"PMI_FD", "5"}})));                // srun --mpi=pmi2
  EXPECT_TRUE(started_by_mpi_launcher(only({{"PMI_RANK", "0"}})));              // MPICH's Hydra
  // A batch script's own step (one task) is no launch; srun of several tasks is.
  EXPECT_FALSE(started_by_mpi_launcher(only({{"SLURM_STEP_NUM_TASKS", "1"}})));
  EXPECT_TRUE(started_by_mpi_launcher(only({{"SLURM_STEP_NUM_TASKS", "4"}})));
}

}  // namespace
}  // namespace tessera
