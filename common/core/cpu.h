// The cores this process may run on, for default thread counts: mpirun and srun bind each rank to
// a set of cores, and threads beyond that set only share it.
#pragma once

namespace tessera {

// The number of CPUs in this process's affinity mask (sched_getaffinity), at least 1; the machine's
// core count when the mask cannot be read.
int usable_cores();

// `requested` when > 0, else usable_cores(). Logs a warning (once per call) when `requested`
// exceeds usable_cores(), naming `what` (e.g. "--threads"): the threads would share cores.
int thread_count(int requested, const char* what);

// Makes glibc's malloc keep freed memory for reuse instead of handing it back to the kernel: one
// arena, no mmap for large blocks, trimming only beyond 2 GB of free heap. Inference frees and
// allocates activations of up to hundreds of MB every batch; as fresh mmaps they page-fault on
// every first touch, which took 43 % of embed's CPU time in the kernel (docs/performance.md).
// Memory then stays at the process's peak. Call first in main, before any thread starts (MPI's
// included). Returns false when glibc refused a setting.
bool keep_freed_memory();

}  // namespace tessera
