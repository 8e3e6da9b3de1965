// The rank side of a search over an index spread on ranks: which shards a rank holds, and the
// round that brings every rank's best hits to rank 0 and merges them. query (one process, or
// mpirun) and serve (resident ranks) both search this way, so their answers are the same.
#pragma once

#include <vector>

#include "common/mpi/comm.h"
#include "common/search/shard_set.h"

namespace tessera::search {

// The shards of an index of `shards` shards that rank `rank` of `ranks` holds: the cyclic
// partition (k mod ranks = rank), ascending. Pure; empty for a rank beyond the shards.
std::vector<int> owned_shards(int shards, int rank, int ranks);

// Collective. `local` is this rank's best hits per query (each list best first), the same number
// of queries on every rank; query q keeps at most `k[q]` hits. Returns on rank 0 the best k[q] of
// every rank's lists per query (merge_hits: ties by ascending patch id), and an empty vector on the
// other ranks. With one rank, `local` is returned as it is. Throws Error when a rank's bytes do
// not decode or hold another number of queries.
std::vector<std::vector<Hit>> gather_best_hits(Comm& comm, std::vector<std::vector<Hit>> local,
                                               const std::vector<int>& k, bool higher_is_better);

}  // namespace tessera::search
