// The shared entry point of every MPI executable, so that no main repeats MPI set-up, option
// parsing, logging set-up or the error-to-exit-code policy.
#pragma once

#include <functional>
#include <string>

#include "common/mpi/comm.h"
#include "common/core/options.h"

namespace tessera {

// Initialises and finalises MPI (MPI_THREAD_FUNNELED: only the main thread calls MPI). Move-only.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

using StageBody = std::function<int(const po::variables_map& options, Comm& comm)>;

// Runs a stage: MPI init, option parsing with `desc` (common options are added here), --help
// (printed by rank 0, exit 0), logging set-up, HDF5 error handling, then `body`.
//   - Option errors: rank 0 prints the message, every rank returns kExitBadInput.
//   - `body` returns the exit code (collective outcomes such as an invalid manifest are returned
//     by every rank alike).
//   - An exception escaping `body` on any rank is logged with that rank and, when the job has more
//     than one rank, aborts the whole job with the exception's exit code so no rank hangs in a
//     collective.
int mpi_main(int argc, char** argv, const std::string& usage, po::options_description desc,
             const StageBody& body);

}  // namespace tessera
