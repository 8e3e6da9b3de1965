// Block-cyclic partition of a global item list over ranks: item i belongs to rank
// (i / block) mod size. block = 1 is the plain cyclic partition. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::patchgen {

// The rank owning item `i`. Requires block >= 1, size >= 1.
inline int owner_of(int64_t i, int64_t block, int size) {
  return static_cast<int>((i / block) % size);
}

// Number of items of `total` owned by `rank`.
int64_t owned_count(int64_t total, int64_t block, int rank, int size);

// The global indices owned by `rank`, ascending.
std::vector<int64_t> owned_items(int64_t total, int64_t block, int rank, int size);

}  // namespace tessera::patchgen
