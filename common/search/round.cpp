#include "common/search/round.h"

#include "common/core/error.h"
#include "common/stage/partition.h"

namespace tessera::search {

std::vector<int> owned_shards(int shards, int rank, int ranks) {
  std::vector<int> mine;
  const Partition owners = Partition::cyclic(shards, ranks);
  for (int64_t j = 0; j < owners.count(rank); ++j) {
    mine.push_back(static_cast<int>(owners.global_index(rank, j)));
  }
  return mine;
}

std::vector<std::vector<Hit>> gather_best_hits(Comm& comm, std::vector<std::vector<Hit>> local,
                                               const std::vector<int>& k, bool higher_is_better) {
  if (comm.size() == 1) return local;
  const std::vector<std::string> all = comm.allgather(encode_hits(local));
  if (comm.rank() != 0) return {};
  std::vector<std::vector<std::vector<Hit>>> lists;
  for (const auto& bytes : all) {
    lists.push_back(decode_hits(bytes));
    if (lists.back().size() != local.size()) {
      fail("rank {} sent hits of {} queries, rank 0 searched {}", lists.size() - 1,
           lists.back().size(), local.size());
    }
  }
  for (size_t q = 0; q < local.size(); ++q) {
    std::vector<std::vector<Hit>> per_rank;
    for (auto& l : lists) per_rank.push_back(std::move(l[q]));
    local[q] = merge_hits(per_rank, k.at(q), higher_is_better);
  }
  return local;
}

}  // namespace tessera::search
