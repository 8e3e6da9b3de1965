// embed's entry point: batched foundation-model inference over a completed patchgen run,
// rank-local shards and markers, rank 0's merge into RUN/embed/<tag>/.
#pragma once

#include "common/mpi/comm.h"
#include "stages/embed/config.h"

namespace tessera::embed {

// Collective. Returns 0 on success (the same on every rank). Throws InvalidInput for a run
// without patchgen's _SUCCESS, an unusable model or preset, or a run directory holding another
// configuration (without --overwrite); IoError for I/O failures; Error naming patch ids for
// non-finite embeddings. Reruns skip ranks with a valid marker; a complete run returns at once.
int run(const Config& config, Comm& comm);

}  // namespace tessera::embed
