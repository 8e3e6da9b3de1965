// Rank 0's queue of searches between the HTTP threads and the thread that runs the collective
// rounds (the main thread, the only one that calls MPI). HTTP threads submit a job and wait for its
// hits; the round thread takes every job that arrived within a short tick as one batch. Each job
// is stamped with the generation of the index it was submitted for (set_generation), so that a
// round searches one generation only. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/search/shard_set.h"
#include "stages/serve/protocol.h"

namespace tessera::serve {

class Batcher {
 public:
  struct Pending {
    SearchJob job;
    std::promise<std::vector<search::Hit>> result;
    int generation = 0;          // the generation stamped at submit
    std::thread::id submitter;   // the thread that waits for the result
  };

  // Queues `job`, stamped with generation(); the future holds its hits, or the exception of its
  // round. Throws Error ("the service is stopping") after refuse() or close().
  std::future<std::vector<search::Hit>> submit(SearchJob job);
  // The same, stamped `generation`: the generation of the index its request resolved the query
  // against (GenerationView::generation), so that it is searched in that generation or not at all.
  std::future<std::vector<search::Hit>> submit(SearchJob job, int generation);

  // The stamp of later submits. Jobs queued in submit order carry ascending stamps.
  void set_generation(int generation);
  int generation() const;

  // Waits up to `wait` for a first job, then gathers for `tick` more (or until `max_jobs` are
  // queued) and returns them in arrival order; empty when none came or after close(). The batch
  // holds jobs of one generation: the first job's.
  std::vector<Pending> take(std::chrono::duration<double> wait, std::chrono::duration<double> tick,
                            size_t max_jobs);
  // The same, for the jobs stamped `generation` only, wherever they are queued (in queue order):
  // empty after `wait` when none is. After refuse(), returns what is queued without waiting.
  std::vector<Pending> take(std::chrono::duration<double> wait, std::chrono::duration<double> tick,
                            size_t max_jobs, int generation);

  // Delivers a batch's hits (one list per job) or its round's exception, and counts its
  // submitters as no longer waiting (waiting_requests).
  void answer(std::vector<Pending>& batch, std::vector<std::vector<search::Hit>> hits);
  void answer_with_error(std::vector<Pending>& batch, std::exception_ptr error);

  // Threads with a submitted job not yet answered (answer(), answer_with_error(), close()).
  size_t waiting_requests() const;

  // Later submits fail with an Error ("the service is stopping"); what is queued stays for take().
  void refuse();
  // refuse(), wakes take(), and fails every queued job with that Error.
  void close();
  size_t queued() const;
  size_t queued(int generation) const;
  // Fails every queued job stamped below `generation` (its index is gone: 503, retry) and returns
  // how many.
  size_t fail_older(int generation);

 private:
  void answered(const Pending& p);  // with mutex_ held

  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Pending> queue_;
  std::unordered_map<std::thread::id, size_t> waiting_;  // unanswered jobs by submitter
  int generation_ = 0;
  bool refusing_ = false;
  bool closed_ = false;
};

}  // namespace tessera::serve
