#include "stages/embed/work.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera::embed {
namespace {

TEST(EmbedWork, BatchesCoverEveryRowOnceInOrderForEveryPartition) {
  for (const char* spec : {"cyclic", "block-cyclic:4", "contiguous"}) {
    for (int size = 1; size <= 5; ++size) {
      const Partition p(Partition::Spec::parse(spec, "partition"), 23, size);
      std::set<int64_t> all;
      for (int r = 0; r < size; ++r) {
        int64_t last = -1;
        for (int64_t b = 0; b < batch_count(p, r, 3); ++b) {
          auto rows = batch_rows(p, r, 3, b);
          EXPECT_LE(rows.size(), 3u);
          EXPECT_FALSE(rows.empty());
          for (int64_t i : rows) {
            EXPECT_EQ(p.owner(i), r);
            EXPECT_GT(i, last);
            last = i;
            EXPECT_TRUE(all.insert(i).second);
          }
        }
      }
      EXPECT_EQ(all.size(), 23u) << spec << " " << size;
    }
  }
}

TEST(EmbedWork, CyclicRowsOfARank) {
  const Partition p = Partition::cyclic(7, 3);
  EXPECT_EQ(batch_rows(p, 1, 4, 0), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(batch_count(p, 1, 4), 1);
  EXPECT_EQ(batch_count(Partition::cyclic(0, 3), 0, 4), 0);
}

TEST(EmbedWork, GroupByShardReadsEachShardOnceInRowOrder) {
  // A batch whose positions 0..3 live in shards 1,0,1,0 at rows 2,0,0,2.
  auto reads = group_by_shard({1, 0, 1, 0}, {2, 0, 0, 2});
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
