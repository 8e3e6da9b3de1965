#include "common/mpi/comm.h"

#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

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

void agree_on_failure(Comm& comm, const std::function<void()>& act) {
  std::string mine;  // encode_error of this rank's failure, "" when it succeeded
  try {
    act();
  } catch (const Error& e) {
    mine = encode_error(e);
  } catch (const std::exception& e) {
    mine = encode_error(Error(e.what()));
  } catch (...) {
    mine = encode_error(Error("an exception that is not a std::exception"));
  }
  // The largest of size - rank over the failing ranks names the lowest one.
  const int64_t size = comm.size();
  const int64_t top = comm.allreduce_max(mine.empty() ? int64_t{0} : size - comm.rank());
  if (top == 0) return;
  const int root = static_cast<int>(size - top);
  std::string encoded;
  if (comm.rank() == root) encoded = mine;
  encoded = comm.broadcast(encoded, root);
  if (root == 0) rethrow_encoded(encoded);
  // The kind and exit code lead the text ("<kind><code>:"): the rank goes in front of the message.
  const size_t colon = encoded.find(':');
  encoded.insert(colon + 1, fmt::format("rank {}: ", root));
  rethrow_encoded(encoded);
}

void SerialComm::abort(int exit_code) { std::_Exit(exit_code); }

}  // namespace tessera
