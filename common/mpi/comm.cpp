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

std::string decided_by_root(Comm& comm, const std::function<std::string()>& decide,
                            bool wait_in_barrier) {
  // One broadcast carries the outcome: '+' and the result, or '!' and the encoded error.
  std::string text;
  if (comm.rank() == 0) {
    try {
      text = "+" + decide();
    } catch (const Error& e) {
      text = "!" + encode_error(e);
    }
  }
  if (wait_in_barrier) comm.barrier();
  text = comm.broadcast(text, 0);
  if (text.at(0) == '!') rethrow_encoded(text.substr(1));
  return text.substr(1);
}

void done_by_root(Comm& comm, const std::function<void()>& act, bool wait_in_barrier) {
  decided_by_root(
      comm,
      [&] {
        act();
        return std::string();
      },
      wait_in_barrier);
}

void SerialComm::abort(int exit_code) { std::_Exit(exit_code); }

}  // namespace tessera
