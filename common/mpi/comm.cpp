#include "common/mpi/comm.h"

#include <chrono>
#include <cstdlib>

#include "common/core/error.h"

namespace tessera {

double timed_barrier(Comm& comm) {
  const auto start = std::chrono::steady_clock::now();
  comm.barrier();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void SerialComm::abort(int exit_code) { std::_Exit(exit_code); }

}  // namespace tessera
