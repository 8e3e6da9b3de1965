// ingest's entry point: takes a completed embed output (every part, or the parts named) and the
// patch index for metadata, and builds K FAISS shards under RUN/ingest/<tag>/, each rank building
// the shards the partition gives it; rank 0 writes catalog.json. `--append` adds the embed parts
// completed since as a new generation of segments, without touching what is there.
#pragma once

#include "common/mpi/comm.h"
#include "stages/ingest/config.h"

namespace tessera::ingest {

// Collective. Returns the exit code, the same on every rank: 0 on success (also when --append
// finds nothing to add). Throws InvalidInput for an incomplete or missing embed input (naming the
// parts to run), an index string FAISS refuses, settings that differ from the existing output
// (without --overwrite; for --append, from its catalog); IoError for damaged inputs and I/O
// failures. Reruns skip ranks with a valid marker; a complete generation returns at once.
int run(const Config& config, Comm& comm);

}  // namespace tessera::ingest
