// An in-process communicator: R ranks run as R threads of one process and meet in a shared
// rendezvous, so that a stage's run() is unit-tested with several ranks without mpirun.
//
// Failure model (the in-process stand-in for MPI_Abort): when a rank throws out of its function,
// or calls abort(), the rendezvous is poisoned; every collective that is waiting or entered later
// throws CommAborted, so no rank hangs for one that has failed. A rank that returns while others
// wait in a collective it will never enter, or two ranks entering different collectives, poison
// it too (in MPI both would hang or corrupt data). There are no timeouts.
//
// Ranks as threads share what a process owns: the spdlog logger (each thread's lines carry its
// own rank, see run_ranks), fcntl file locks (run stages with file_locking off when R > 1), the
// working directory, signal dispositions and resource limits.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/mpi/comm.h"

namespace tessera {

// What a collective throws on the other ranks once one rank has failed or called abort(). Its
// exit code is the failing rank's, so every rank of the job ends with the same code.
class CommAborted : public Error {
 public:
  CommAborted(const std::string& what, int exit_code) : Error(what, exit_code) {}
};

// The shared state of one in-process job; created by ThreadComm::group.
class Rendezvous;

// One rank of an in-process job. Thread-safe across ranks (each rank's object is used by its own
// thread). Not copyable.
class ThreadComm final : public Comm {
 public:
  // `size` communicators of one job, rank i at index i. Throws InvalidInput when size < 1.
  static std::vector<std::unique_ptr<ThreadComm>> group(int size);

  ThreadComm(std::shared_ptr<Rendezvous> rendezvous, int rank);
  ThreadComm(const ThreadComm&) = delete;
  ThreadComm& operator=(const ThreadComm&) = delete;
  ~ThreadComm() override;

  int rank() const override { return rank_; }
  int size() const override;
  int local_rank() const override { return rank_; }  // one node
  // Collectives: throw CommAborted once the job is poisoned (see above).
  void barrier() override;
  std::vector<std::string> allgather(const std::string& bytes) override;
  // Every rank must pass the same root (a mismatch poisons the job).
  std::string broadcast(const std::string& bytes, int root) override;
  int64_t allreduce_sum(int64_t value) override;
  double allreduce_sum(double value) override;  // summed in rank order: deterministic
  int64_t allreduce_max(int64_t value) override;
  double allreduce_max(double value) override;
  // Every rank must pass a vector of the same length (a mismatch poisons the job).
  void allreduce_sum(std::vector<int64_t>& values) override;
  // Not collective. Poisons the job with `exit_code` and throws CommAborted on this rank; it does
  // not end the process.
  [[noreturn]] void abort(int exit_code) override;

  // Not collective. Poisons the job on behalf of this rank: later and waiting collectives throw
  // CommAborted("rank R failed: <reason>", exit_code). The first poisoning wins; later ones are
  // ignored. Returns whether this call poisoned it.
  bool fail(const std::string& reason, int exit_code);
  // Not collective. This rank's function has returned: any collective still waiting for it, or
  // entered later, poisons the job (it would wait forever).
  void depart();
  // Not collective. The rank whose call poisoned the job (fail, abort, or a collective that found
  // a mismatch or a departed rank), -1 while the job is not poisoned.
  int poisoned_by() const;
  // Not collective. How many ranks wait in the collective now under way (0 between collectives):
  // lets a test make a rank fail while the others are known to be blocked.
  int waiting() const;

 private:
  std::vector<std::string> exchange(const std::string& operation, const std::string& bytes);

  std::shared_ptr<Rendezvous> rendezvous_;
  int rank_;
};

// How one rank of run_ranks ended.
struct RankOutcome {
  int exit_code = 0;         // what the function returned, or the exit code of what it threw
  std::exception_ptr error;  // what it threw (null when it returned)
};

// Runs fn(comm) for ranks 0..size-1, each on its own thread with its own ThreadComm of one job,
// and waits for all of them. A rank that throws poisons the job (see above) so the others end
// too. Each thread logs with its own rank tag ("[rank r/R]") through the process's logger.
// Never throws for a rank's failure; the outcomes are indexed by rank, and `first_failure`, when
// given, receives the rank whose exception poisoned the job (-1 when none did).
std::vector<RankOutcome> run_rank_outcomes(int size, const std::function<int(Comm&)>& fn,
                                           int* first_failure = nullptr);

// The same, for the common case: returns every rank's result, or, when any rank threw, rethrows
// (with its own type) the exception that poisoned the job first, after every rank has ended.
std::vector<int> run_ranks(int size, const std::function<int(Comm&)>& fn);

}  // namespace tessera
