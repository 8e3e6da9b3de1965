// Elapsed steady-clock time in seconds, the unit of every timing in markers, stats and logs.
#pragma once

#include <chrono>

namespace tessera {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tessera
