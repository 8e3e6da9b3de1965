#include "common/vector/topk.h"

#include <algorithm>

namespace tessera {

std::vector<Neighbor> merge_topk(const std::vector<std::vector<Neighbor>>& lists, int k,
                                 bool higher_is_better) {
  std::vector<Neighbor> all;
  if (k <= 0) return all;
  size_t total = 0;
  for (const auto& list : lists) total += list.size();
  all.reserve(total);
  for (const auto& list : lists) {
    for (const Neighbor& n : list) {
      if (n.id >= 0) all.push_back(n);
    }
  }
  auto before = [higher_is_better](const Neighbor& a, const Neighbor& b) {
    if (a.score != b.score) return higher_is_better ? a.score > b.score : a.score < b.score;
    return a.id < b.id;
  };
  const size_t keep = std::min(all.size(), static_cast<size_t>(k));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    before);
  all.resize(keep);
  return all;
}

}  // namespace tessera
