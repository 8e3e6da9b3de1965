#include "stages/embed/work.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tessera::embed {

std::vector<int64_t> rank_rows(int64_t total, int rank, int size) {
  std::vector<int64_t> rows;
  for (int64_t i = rank; i < total; i += size) rows.push_back(i);
  return rows;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& rows, int batch_size) {
  std::vector<std::vector<int64_t>> batches;
  for (size_t b = 0; b < rows.size(); b += static_cast<size_t>(batch_size)) {
    batches.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(b),
                         rows.begin() + static_cast<std::ptrdiff_t>(
                                            std::min(rows.size(), b + static_cast<size_t>(batch_size))));
  }
  return batches;
}

std::vector<ShardRead> group_by_shard(const std::vector<int64_t>& batch,
                                      const std::vector<int32_t>& shard,
                                      const std::vector<int64_t>& row) {
  std::map<int, std::vector<std::pair<uint64_t, int>>> groups;
  for (size_t p = 0; p < batch.size(); ++p) {
    groups[shard[batch[p]]].push_back({static_cast<uint64_t>(row[batch[p]]), static_cast<int>(p)});
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
