// The MPI implementation of Comm. Only the MPI entry point and MPI tests include this header.
#pragma once

#include <mpi.h>

#include "common/mpi/comm.h"

namespace tessera {

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
  // Polls a non-blocking barrier with short sleeps, so a rank that waits for slower ones yields
  // its core to them instead of spinning in MPI.
  void barrier() override;
  std::vector<std::string> allgather(const std::string& bytes) override;
  std::string broadcast(const std::string& bytes, int root) override;
  int64_t allreduce_sum(int64_t value) override;
  double allreduce_sum(double value) override;
  int64_t allreduce_max(int64_t value) override;
  double allreduce_max(double value) override;
  void allreduce_sum(std::vector<int64_t>& values) override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  MPI_Comm comm_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
};

// Throws IoError("MPI <operation> failed: <MPI error string>") unless rc == MPI_SUCCESS.
void mpi_check(int rc, const char* operation);

}  // namespace tessera
