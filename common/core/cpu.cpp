#include "common/core/cpu.h"

#include <malloc.h>

#include <sched.h>

#include <thread>

#include <spdlog/spdlog.h>

namespace tessera {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

int thread_count(int requested, const char* what) {
  const int cores = usable_cores();
  if (requested <= 0) return cores;
  if (requested > cores) {
    spdlog::warn("{} {} exceeds the {} core(s) this process may run on (its CPU affinity): the "
                 "threads share them; give each rank more cores (mpirun --map-by slot:PE=N, "
                 "srun --cpus-per-task=N) or fewer threads",
                 what, requested, cores);
  }
  return requested;
}

bool keep_freed_memory() {
  // mallopt returns 1 on success.
  return mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_MMAP_MAX, 0) == 1 &&
         mallopt(M_TRIM_THRESHOLD, 2047 << 20) == 1;
}

}  // namespace tessera
