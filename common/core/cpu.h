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

}  // namespace tessera
