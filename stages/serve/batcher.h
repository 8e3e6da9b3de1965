// Rank 0's queue of searches between the HTTP threads and the thread that runs the collective
// rounds (the main thread, the only one that calls MPI). HTTP threads submit a job and wait for its
// hits; the round thread takes every job that arrived within a short tick as one batch.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <vector>

#include "stages/query/search.h"
#include "stages/serve/protocol.h"

namespace tessera::serve {

class Batcher {
 public:
  struct Pending {
    SearchJob job;
    std::promise<std::vector<query::Hit>> result;
  };

  // Queues `job`; the future holds its hits, or the exception of its round.
  std::future<std::vector<query::Hit>> submit(SearchJob job);

  // Waits up to `wait` for a first job, then gathers for `tick` more (or until `max_jobs` are
  // queued) and returns them in arrival order; empty when none came or after close().
  std::vector<Pending> take(std::chrono::duration<double> wait, std::chrono::duration<double> tick,
                            size_t max_jobs);

  // Wakes take(); later submits fail with an Error ("the service is stopping").
  void close();
  size_t queued() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Pending> queue_;
  bool closed_ = false;
};

}  // namespace tessera::serve
