// Merging of per-shard nearest-neighbour lists into one global top k. No FAISS here.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct Neighbor {
  float score;
  int64_t id;
};

// Merges best-first result lists (one per shard, as written by VectorIndex::search) into the
// best k of their union: highest scores first when higher_is_better (inner product), lowest
// first otherwise (L2); equal scores in ascending id order. Entries with id < 0 (empty slots)
// are dropped, so fewer than k come back when the lists hold fewer valid entries. The result
// depends only on the multiset of entries, not on the order of the lists or within them.
std::vector<Neighbor> merge_topk(const std::vector<std::vector<Neighbor>>& lists, int k,
                                 bool higher_is_better);

}  // namespace tessera
