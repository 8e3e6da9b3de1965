// Which shards an ingest rank builds and which rows of each embed part it reads for them: pure
// functions of (slide table, shard placement, rank, size), so every rank derives its own share
// and unit tests check the routing without MPI or FAISS.
#pragma once

#include <cstdint>
#include <vector>

#include "common/store/index.h"
#include "stages/ingest/assign.h"

namespace tessera::ingest {

// The shards rank `rank` of `world_size` builds, ascending: rank, rank + R, ... below `shards`
// (none when rank >= shards).
std::vector<int> rank_shards(int shards, int rank, int world_size);

// The slides of one part's slide table that have rows, in table order, with their row counts.
PartSlides part_slides_of(const SlideTable& slides);

// Consecutive rows [first, first + count) of one part's index (and embeddings), all going to
// `shard`; shard -1: routed row by row with cyclic_shard of their position in the ingested
// sequence.
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
  int shard = -1;
};

// The rows of one part that a rank reads, in index order. `slot` (size K) is >= 0 for the shards
// the rank builds. By slide: the rows of each slide of `slides` placed (`placed[i]`, from
// assign_by_slide) on one of its shards, `slide_offset` giving each slide's first row. Cyclic:
// every one of the part's `rows` as one range with shard -1 when the rank builds any shard, else
// none.
std::vector<RowRange> rank_row_ranges(Assign assign, const PartSlides& slides,
                                      const std::vector<int>& placed,
                                      const std::vector<int64_t>& slide_offset, int64_t rows,
                                      const std::vector<int>& slot);

}  // namespace tessera::ingest
