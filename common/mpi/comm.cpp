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

std::string decided_by_root(Comm& comm, const std::function<std::string()>& decide) {
  // One broadcast carries the outcome: '+' result, '-' bad input, '!' any other error.
  std::string text;
  if (comm.rank() == 0) {
    try {
      text = "+" + decide();
    } catch (const InvalidInput& e) {
      text = std::string("-") + e.what();
    } catch (const Error& e) {
      text = std::string("!") + e.what();
    }
  }
  text = comm.broadcast(text, 0);
  if (text.at(0) == '-') throw InvalidInput(text.substr(1));
  if (text.at(0) == '!') throw IoError(text.substr(1));
  return text.substr(1);
}

void SerialComm::abort(int exit_code) { std::_Exit(exit_code); }

}  // namespace tessera
