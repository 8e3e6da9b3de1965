// The communicator abstraction every stage's logic takes as an argument, so that partitioning,
// planning and consolidation run unchanged under MPI and in serial unit tests.
//
// The MPI implementation is in common/mpi/mpi_comm.h, so that mpi.h stays out of this header.
//
// Collective operations ("all ranks must call this") are marked as such; they must be called by
// every rank in the same order. Failures of MPI calls throw IoError naming the operation.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank within the node (for choosing a GPU); 0 for a serial communicator.
  virtual int local_rank() const = 0;

  // Collective. Returns when every rank has entered.
  virtual void barrier() = 0;
  // Collective. Every rank receives every rank's bytes, indexed by rank.
  virtual std::vector<std::string> allgather(const std::string& bytes) = 0;
  // Collective. Every rank receives `bytes` as given on `root`.
  virtual std::string broadcast(const std::string& bytes, int root) = 0;
  // Collective reductions.
  virtual int64_t allreduce_sum(int64_t value) = 0;
  virtual double allreduce_sum(double value) = 0;
  virtual int64_t allreduce_max(int64_t value) = 0;
  virtual double allreduce_max(double value) = 0;
  // Collective. Element-wise sum over ranks of `values`, in place; every rank passes a vector of
  // the same length.
  virtual void allreduce_sum(std::vector<int64_t>& values) = 0;
  // Not collective: terminates every rank of the job with `exit_code`.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// A communicator of one rank; collectives are identities.
class SerialComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  void barrier() override {}
  std::vector<std::string> allgather(const std::string& bytes) override { return {bytes}; }
  std::string broadcast(const std::string& bytes, int) override { return bytes; }
  int64_t allreduce_sum(int64_t value) override { return value; }
  double allreduce_sum(double value) override { return value; }
  int64_t allreduce_max(int64_t value) override { return value; }
  double allreduce_max(double value) override { return value; }
  void allreduce_sum(std::vector<int64_t>&) override {}
  [[noreturn]] void abort(int exit_code) override;
};

// Collective. A barrier that returns the seconds this rank waited in it.
double timed_barrier(Comm& comm);

// Collective. Runs `decide` on rank 0 only (reading a catalog, resolving queries) and returns its
// result on every rank. When it throws a tessera::Error, every rank throws the same type with the
// same exit code and rank 0's message, so no rank waits for a rank that failed and exit codes stay
// the documented ones. With `wait_in_barrier` the other ranks wait in a barrier (which sleeps)
// rather than in the broadcast, leaving rank 0 the cores for a long decision.
std::string decided_by_root(Comm& comm, const std::function<std::string()>& decide,
                            bool wait_in_barrier = false);

// Collective. Runs `act` on rank 0 only (for its side effects: training, writing a consolidated
// file); when it throws, every rank throws it as decided_by_root does.
void done_by_root(Comm& comm, const std::function<void()>& act, bool wait_in_barrier = false);

// Collective: decided_by_root's counterpart for a step every rank runs (checking its share of the
// markers, loading its shards, searching them, parsing options). Runs `act` on every rank; when
// it throws on any rank, every rank throws the error of the lowest rank that failed: the same
// type (InvalidInput, IoError or Error), the same exit code, and its message, prefixed with
// "rank R: " when R is not 0. An exception outside tessera::Error counts as an Error (exit code
// 1) with its what(). When no rank fails it costs one allreduce of one integer; a failure adds
// one broadcast.
void agree_on_failure(Comm& comm, const std::function<void()>& act);

}  // namespace tessera
