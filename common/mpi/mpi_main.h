// The shared entry point of every MPI executable, so that no main repeats MPI set-up, option
// parsing, logging set-up or the error-to-exit-code policy.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/mpi/comm.h"
#include "common/core/options.h"

namespace tessera {

// Initialises and finalises MPI, asking for MPI_THREAD_FUNNELED (only the main thread calls MPI;
// worker threads read and decode). The level the library provides is kept for
// check_thread_level: a constructor cannot report it to every rank. Not copyable.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int thread_level() const { return thread_level_; }

 private:
  int thread_level_ = 0;
};

// Whether `environment` (a getenv) shows a process started by an MPI launcher: mpirun or mpiexec
// (Open MPI's OMPI_COMM_WORLD_SIZE, Hydra's PMI_RANK), srun with PMIx or PMI-2, or a Slurm step
// of several tasks. Without one, MPI_Init would make the process a singleton, one rank, and
// Open MPI starts a helper daemon (orted) for it: most of a short run's start-up.
bool started_by_mpi_launcher(const std::function<const char*(const char*)>& environment);

// Throws Error (exit code 1) naming both levels when `provided` (from MPI_Init_thread) is below
// MPI_THREAD_FUNNELED.
void check_thread_level(int provided);

// Runs on every rank after option parsing: builds and validates the stage's configuration
// (throwing InvalidInput for bad values) and returns what runs the stage with it.
using StageMain = std::function<int(Comm& comm)>;
using StageSetup = std::function<StageMain(const po::variables_map& options)>;

// Runs a stage: MPI init (skipped for a process that no MPI launcher started, which runs as
// one rank with a SerialComm: see started_by_mpi_launcher), option parsing with `table` (common options are added here),
// --help / --help-all / --version (printed by rank 0, exit 0), logging set-up, `setup`, then the
// StageMain it returns.
//   - Parsing, the MPI thread level, logging set-up and `setup` run on every rank and their
//     outcome is agreed collectively (agree_on_failure, common/mpi/comm.h) before any rank starts
//     the stage: on a failure anywhere, rank 0 prints the lowest failing rank's message and every
//     rank returns its exit code (kExitBadInput for options and configuration).
//   - The StageMain returns the exit code (collective outcomes such as an invalid manifest are
//     returned by every rank alike).
//   - An exception escaping the StageMain on any rank is logged with that rank and, when the job
//     has more than one rank, aborts the whole job with the exception's exit code so no rank hangs
//     in a collective.
int mpi_main(int argc, char** argv, const std::string& usage, OptionTable table,
             const StageSetup& setup);

// The same for drivers whose options carry no kinds (every option shown by --help): `body` gets
// the parsed options and runs the stage.
using DriverBody = std::function<int(const po::variables_map& options, Comm& comm)>;
int mpi_main(int argc, char** argv, const std::string& usage, po::options_description desc,
             const DriverBody& body);

}  // namespace tessera
