// embed's work split, pure functions of the index and (rank, size): index row i belongs to rank
// i mod R; a rank's rows are cut into batches in index order; a batch's rows are grouped by the
// patchgen shard that holds them so each shard is read with one call per batch.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::embed {

// The index rows of `rank`: rank, rank + size, ... < total.
std::vector<int64_t> rank_rows(int64_t total, int rank, int size);

// Consecutive slices of `rows` of at most `batch_size`.
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& rows, int batch_size);

struct ShardRead {
  int shard = 0;
  std::vector<uint64_t> shard_rows;  // ascending rows inside the shard
  std::vector<int> positions;        // where each row goes in the batch
};

// Groups a batch's index rows by shard (shards ascending), rows within a shard ascending.
// `shard` and `row` are the index's columns.
std::vector<ShardRead> group_by_shard(const std::vector<int64_t>& batch,
                                      const std::vector<int32_t>& shard,
                                      const std::vector<int64_t>& row);

}  // namespace tessera::embed
