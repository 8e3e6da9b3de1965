// The one process-wide logger. Every line carries the rank and world size, so interleaved output
// of many ranks on a shared log stays attributable.
#pragma once

#include <string>

namespace tessera {

// Configures spdlog's default logger: stderr, pattern
// "[2026-11-30 02:25:28.123] [info] [rank 1/4] message". `level` is one of trace, debug, info,
// warn, error, critical, off; throws InvalidInput for anything else. Call once per process before
// logging; calling again reconfigures.
void init_logging(int rank, int size, const std::string& level);

// While it lives, the lines this thread logs carry "[rank r/size]" instead of the process's tag
// (for ranks run as threads of one process, see common/mpi/thread_comm.h). Only the pattern of
// init_logging shows the tag. Not movable; nests (the destructor restores the previous tag).
class ScopedLogRank {
 public:
  ScopedLogRank(int rank, int size);
  ~ScopedLogRank();
  ScopedLogRank(const ScopedLogRank&) = delete;
  ScopedLogRank& operator=(const ScopedLogRank&) = delete;

 private:
  std::string tag_;
  const std::string* previous_;
};

}  // namespace tessera
