// barrier_bench: how much a rank that waits in a barrier slows a rank that still works on the
// same core. Rank 0 works (a fixed CPU-bound loop, timed) while every other rank waits for it in
// a barrier: MPI_Barrier (Open MPI busy-polls), or tessera's Comm::barrier (a non-blocking
// barrier polled with sleeps). Repetitions alternate the two. Run all ranks on one core to see
// the contention an oversubscribed node has:
//
//   mpirun -np 2 --bind-to core --cpu-set 0 barrier_bench --reps 5 --out barrier.json
//
// Writes JSON: every repetition, median/min/max per mode, versions, the command line.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"
#include "common/mpi/mpi_comm.h"
#include "common/mpi/mpi_main.h"

using nlohmann::json;
using namespace tessera;

namespace {

// A CPU-bound loop of `iterations` steps; returns a value so it is not optimised away.
uint64_t work(uint64_t iterations) {
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < iterations; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

double seconds_of(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  MpiComm comm(MPI_COMM_WORLD);
  int reps = 5;
  uint64_t iterations = 2'000'000'000ull;
  std::string out = "barrier_bench.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--reps") reps = std::stoi(argv[i + 1]);
    if (key == "--iterations") iterations = std::stoull(argv[i + 1]);
    if (key == "--out") out = argv[i + 1];
  }
  json repetitions = json::array();
  std::vector<double> mpi_s, tessera_s;
  uint64_t sink = 0;
  for (int rep = 0; rep < 2 * reps; ++rep) {
    const bool raw = rep % 2 == 0;
    comm.barrier();
    double worked = 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      sink ^= work(iterations);
      worked = seconds_of(t0);
    }
    if (raw) {
      mpi_check(MPI_Barrier(MPI_COMM_WORLD), "Barrier");
    } else {
      comm.barrier();
    }
    worked = comm.allreduce_max(worked);
    (raw ? mpi_s : tessera_s).push_back(worked);
    repetitions.push_back({{"index", rep}, {"mode", raw ? "MPI_Barrier" : "Comm::barrier"},
                           {"worker_s", worked}});
  }
  if (comm.rank() == 0) {
    json report = {
        {"benchmark", "barrier_bench"},
        {"parameters", {{"ranks", comm.size()}, {"reps", reps}, {"iterations", iterations}}},
        {"machine", bench::machine_info()},
        {"versions", bench::versions()},
        {"command", bench::command_line(argc, argv)},
        {"repetitions", repetitions},
        {"summary",
         {{"MPI_Barrier_worker_s", bench::summarize(mpi_s)},
          {"Comm_barrier_worker_s", bench::summarize(tessera_s)}}},
        {"checksum", sink}};
    std::ofstream(out) << report.dump(2) << "\n";
    std::cout << report["summary"].dump(2) << "\n";
  }
  return 0;
}
