#include "stages/patchgen/partition.h"

#include <algorithm>

#include "common/error.h"

namespace tessera::patchgen {

int64_t owned_count(int64_t total, int64_t block, int rank, int size) {
  TESSERA_CHECK(block >= 1 && size >= 1 && rank >= 0 && rank < size,
                "partition: invalid block {} rank {} size {}", block, rank, size);
  const int64_t round = block * size;
  const int64_t full_rounds = total / round;
  const int64_t rest = total % round;
  return full_rounds * block + std::clamp<int64_t>(rest - rank * block, 0, block);
}

std::vector<int64_t> owned_items(int64_t total, int64_t block, int rank, int size) {
  std::vector<int64_t> items;
  items.reserve(static_cast<size_t>(owned_count(total, block, rank, size)));
  for (int64_t start = rank * block; start < total; start += block * size) {
    for (int64_t i = start; i < std::min(total, start + block); ++i) items.push_back(i);
  }
  return items;
}

}  // namespace tessera::patchgen
