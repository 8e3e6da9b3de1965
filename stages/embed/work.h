// embed's work split, pure functions of the partition and the rank: a rank's index rows (under
// --partition, cyclic by default) are cut into batches in index order, generated on the fly so a
// rank never lists all its rows; a batch's rows are grouped by the patchgen shard that holds them
// so each shard is read with one call per batch.
#pragma once

#include <cstdint>
#include <vector>

#include "common/stage/partition.h"

namespace tessera::embed {

// Batch `b` of `rank`: the index rows of its local items [b * batch_size, ...), ascending, at
// most batch_size of them.
std::vector<int64_t> batch_rows(const Partition& partition, int rank, int batch_size, int64_t b);

// Number of batches of `rank`.
int64_t batch_count(const Partition& partition, int rank, int batch_size);

struct ShardRead {
  int shard = 0;
  std::vector<uint64_t> shard_rows;  // ascending rows inside the shard
  std::vector<int> positions;        // where each row goes in the batch
};

// Groups a batch's rows by shard (shards ascending), rows within a shard ascending. `shard` and
// `row` are the batch's index columns (one entry per batch position).
std::vector<ShardRead> group_by_shard(const std::vector<int32_t>& shard,
                                      const std::vector<int64_t>& row);

}  // namespace tessera::embed
