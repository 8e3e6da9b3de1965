#include "common/mpi/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#include "common/core/error.h"

namespace tessera {

void mpi_check(int rc, const char* operation) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail<IoError>("MPI {} failed: {}", operation, std::string(text, length));
}

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  // Errors come back as codes so mpi_check can turn them into exceptions with context.
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
  mpi_check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
  mpi_check(MPI_Comm_size(comm_, &size_), "Comm_size");
  mpi_check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_),
            "Comm_split_type");
  mpi_check(MPI_Comm_rank(node_comm_, &local_rank_), "Comm_rank(node)");
}

MpiComm::MpiComm(MpiComm&& other) noexcept
    : comm_(other.comm_), node_comm_(other.node_comm_), rank_(other.rank_), size_(other.size_),
      local_rank_(other.local_rank_) {
  other.node_comm_ = MPI_COMM_NULL;
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (node_comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&node_comm_);
}

void MpiComm::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibarrier(comm_, &request), "Ibarrier");
  // Start with short sleeps so a barrier that all ranks reach together costs little; waits of
  // minutes settle at one wake-up every 20 ms.
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    mpi_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "Test(barrier)");
    if (done) return;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

std::vector<std::string> MpiComm::allgather(const std::string& bytes) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    fail<IoError>("MPI Allgatherv: {} bytes exceed the 2 GiB message limit", bytes.size());
  }
  int mine = static_cast<int>(bytes.size());
  std::vector<int> counts(size_);
  mpi_check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "Allgather");
  std::vector<int> displs(size_);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > std::numeric_limits<int>::max()) {
    fail<IoError>("MPI Allgatherv: {} bytes in total exceed the 2 GiB message limit", total);
  }
  std::string all(static_cast<size_t>(total), '\0');
  mpi_check(MPI_Allgatherv(bytes.data(), mine, MPI_BYTE, all.data(), counts.data(), displs.data(),
                           MPI_BYTE, comm_),
            "Allgatherv");
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], counts[r]);
  return out;
}

std::string MpiComm::broadcast(const std::string& bytes, int root) {
  int64_t length = rank_ == root ? static_cast<int64_t>(bytes.size()) : 0;
  mpi_check(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm_), "Bcast(length)");
  if (length > std::numeric_limits<int>::max()) {
    fail<IoError>("MPI Bcast: {} bytes exceed the 2 GiB message limit", length);
  }
  std::string out = rank_ == root ? bytes : std::string(static_cast<size_t>(length), '\0');
  mpi_check(MPI_Bcast(out.data(), static_cast<int>(length), MPI_BYTE, root, comm_), "Bcast");
  return out;
}

int64_t MpiComm::allreduce_sum(int64_t value) {
  int64_t out = 0;
  mpi_check(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, comm_), "Allreduce(sum)");
  return out;
}

double MpiComm::allreduce_sum(double value) {
  double out = 0;
  mpi_check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, comm_), "Allreduce(sum)");
  return out;
}

int64_t MpiComm::allreduce_max(int64_t value) {
  int64_t out = 0;
  mpi_check(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, comm_), "Allreduce(max)");
  return out;
}

double MpiComm::allreduce_max(double value) {
  double out = 0;
  mpi_check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm_), "Allreduce(max)");
  return out;
}

void MpiComm::allreduce_sum(std::vector<int64_t>& values) {
  if (values.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    fail<IoError>("MPI Allreduce: {} values exceed the message limit", values.size());
  }
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                          MPI_INT64_T, MPI_SUM, comm_),
            "Allreduce(sum, vector)");
}

void MpiComm::abort(int exit_code) {
  MPI_Abort(comm_, exit_code);
  std::_Exit(exit_code);
}

}  // namespace tessera
