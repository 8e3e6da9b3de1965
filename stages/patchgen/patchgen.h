// patchgen's entry point: tissue detection, partitioned patch extraction into one HDF5
// shard per rank, markers, and rank 0's consolidation into RUN/patchgen/index.h5 and _SUCCESS.
#pragma once

#include "common/mpi/comm.h"
#include "stages/patchgen/config.h"

namespace tessera::patchgen {

// Collective: every rank of `comm` calls it with the same config. Returns the exit code, the
// same on every rank: 0 when every slide succeeded, kExitSlidesFailed (3) when some failed (the
// run is complete and _SUCCESS lists them), kExitBadInput (2) when the manifest is invalid
// (nothing written). Throws on I/O errors and on a locked or incompatible run directory.
//
// Reruns: with the same configuration and world size, ranks whose marker is valid are skipped
// and the others redo their shard from scratch; a completed run returns at once.
int run(const Config& config, Comm& comm);

}  // namespace tessera::patchgen
