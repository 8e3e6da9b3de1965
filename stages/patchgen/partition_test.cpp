#include "stages/patchgen/partition.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera::patchgen {
namespace {

TEST(Partition, CyclicAssignsItemIToRankIModR) {
  auto items = owned_items(10, 1, 1, 3);
  EXPECT_EQ(items, (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(owner_of(7, 1, 3), 1);
}

TEST(Partition, BlockCyclic) {
  EXPECT_EQ(owned_items(11, 2, 0, 2), (std::vector<int64_t>{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(owned_items(11, 2, 1, 2), (std::vector<int64_t>{2, 3, 6, 7, 10}));
}

TEST(Partition, EveryItemOwnedExactlyOnceForManySizes) {
  for (int64_t total : {0, 1, 2, 7, 64, 1000, 1001}) {
    for (int64_t block : {1, 2, 3, 16}) {
      for (int size = 1; size <= 9; ++size) {
        std::set<int64_t> seen;
        int64_t count_sum = 0;
        for (int rank = 0; rank < size; ++rank) {
          auto items = owned_items(total, block, rank, size);
          EXPECT_EQ(static_cast<int64_t>(items.size()), owned_count(total, block, rank, size))
              << total << " " << block << " " << rank << "/" << size;
          count_sum += static_cast<int64_t>(items.size());
          for (int64_t i : items) {
            EXPECT_EQ(owner_of(i, block, size), rank);
            EXPECT_TRUE(seen.insert(i).second) << "item " << i << " owned twice";
          }
        }
        EXPECT_EQ(count_sum, total);
        EXPECT_EQ(static_cast<int64_t>(seen.size()), total);
      }
    }
  }
}

TEST(Partition, LoadIsBalancedWithinOneBlock) {
  for (int size = 1; size <= 8; ++size) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int rank = 0; rank < size; ++rank) {
      int64_t n = owned_count(1003, 4, rank, size);
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    EXPECT_LE(hi - lo, 4);
  }
}

}  // namespace
}  // namespace tessera::patchgen
