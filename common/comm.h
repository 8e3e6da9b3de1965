// The communicator abstraction every stage's logic takes as an argument, so that partitioning,
// planning and consolidation run unchanged under MPI and in serial unit tests.
//
// Collective operations ("all ranks must call this") are marked as such; they must be called by
// every rank in the same order. Failures of MPI calls throw IoError naming the operation.
#pragma once

#include <mpi.h>

#include <cstdint>
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
  [[noreturn]] void abort(int exit_code) override;
};

// Wraps an MPI communicator (not owned; MPI must be initialised). Move-only.
class MpiComm final : public Comm {
 public:
  explicit MpiComm(MPI_Comm comm);
  MpiComm(MpiComm&&) noexcept;
  MpiComm& operator=(MpiComm&&) = delete;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  void barrier() override;
  std::vector<std::string> allgather(const std::string& bytes) override;
  std::string broadcast(const std::string& bytes, int root) override;
  int64_t allreduce_sum(int64_t value) override;
  double allreduce_sum(double value) override;
  int64_t allreduce_max(int64_t value) override;
  double allreduce_max(double value) override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  MPI_Comm comm_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
};

// Collective. A barrier that returns the seconds this rank waited in it.
double timed_barrier(Comm& comm);

// Throws IoError("MPI <operation> failed: <MPI error string>") unless rc == MPI_SUCCESS.
void mpi_check(int rc, const char* operation);

}  // namespace tessera
