#include "stages/embed/work.h"

#include <algorithm>
#include <map>

namespace tessera::embed {

int64_t batch_count(const Partition& partition, int rank, int batch_size) {
  return (partition.count(rank) + batch_size - 1) / batch_size;
}

std::vector<int64_t> batch_rows(const Partition& partition, int rank, int batch_size, int64_t b) {
  const int64_t first = b * batch_size;
  const int64_t last = std::min(partition.count(rank), first + batch_size);
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(std::max<int64_t>(0, last - first)));
  for (int64_t k = first; k < last; ++k) rows.push_back(partition.global_index(rank, k));
  return rows;
}

std::vector<ShardRead> group_by_shard(const std::vector<int32_t>& shard,
                                      const std::vector<int64_t>& row) {
  std::map<int, std::vector<std::pair<uint64_t, int>>> groups;
  for (size_t p = 0; p < shard.size(); ++p) {
    groups[shard[p]].push_back({static_cast<uint64_t>(row[p]), static_cast<int>(p)});
  }
  std::vector<ShardRead> reads;
  for (auto& [s, members] : groups) {
    std::sort(members.begin(), members.end());
    ShardRead r;
    r.shard = s;
    for (const auto& [shard_row, position] : members) {
      r.shard_rows.push_back(shard_row);
      r.positions.push_back(position);
    }
    reads.push_back(std::move(r));
  }
  return reads;
}

}  // namespace tessera::embed
