// query's entry point: nearest-neighbour search over the shards of an ingest output, alone (the
// shards searched concurrently on threads) or under mpirun (each rank loads and searches only its
// shards; rank 0 merges the top-k lists and reports).
#pragma once

#include "common/mpi/comm.h"
#include "stages/query/config.h"

namespace tessera::query {

// Collective. Returns 0 (the same on every rank) after rank 0 wrote the report (and the
// mosaic). Throws InvalidInput for a missing catalog, an unknown patch id or slide, a malformed
// filter or one naming unknown columns, query vectors of another dimension; IoError for missing
// or damaged shard files (checked against the catalog).
int run(const Config& config, Comm& comm);

}  // namespace tessera::query
