#include "stages/embed/work.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera::embed {
namespace {

TEST(EmbedWork, RankRowsAreCyclicAndCoverEverything) {
  EXPECT_EQ(rank_rows(7, 1, 3), (std::vector<int64_t>{1, 4}));
  for (int size = 1; size <= 5; ++size) {
    std::set<int64_t> all;
    for (int r = 0; r < size; ++r) {
      for (int64_t i : rank_rows(23, r, size)) {
        EXPECT_EQ(i % size, r);
        EXPECT_TRUE(all.insert(i).second);
      }
    }
    EXPECT_EQ(all.size(), 23u);
  }
}

TEST(EmbedWork, BatchesKeepOrderAndLastIsShort) {
  auto batches = make_batches({5, 6, 7, 8, 9}, 2);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{9}));
  EXPECT_TRUE(make_batches({}, 4).empty());
}

TEST(EmbedWork, GroupByShardReadsEachShardOnceInRowOrder) {
  // Index rows 0..5 live in shards 1,0,1,0,1,0 at rows 0,0,1,1,2,2.
  std::vector<int32_t> shard = {1, 0, 1, 0, 1, 0};
  std::vector<int64_t> row = {0, 0, 1, 1, 2, 2};
  auto reads = group_by_shard({4, 1, 0, 5}, shard, row);
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].shard, 0);
  EXPECT_EQ(reads[0].shard_rows, (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(reads[0].positions, (std::vector<int>{1, 3}));
  EXPECT_EQ(reads[1].shard, 1);
  EXPECT_EQ(reads[1].shard_rows, (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(reads[1].positions, (std::vector<int>{2, 0}));
}

}  // namespace
}  // namespace tessera::embed
