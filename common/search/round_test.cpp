#include "common/search/round.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/core/error.h"
#include "common/mpi/thread_comm.h"

namespace tessera::search {
namespace {

TEST(OwnedShards, EveryShardHasExactlyOneRank) {
  for (int shards : {1, 3, 8}) {
    for (int ranks = 1; ranks <= 5; ++ranks) {
      std::vector<int> owners(shards, -1);
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int> mine = owned_shards(shards, r, ranks);
        EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
        for (int k : mine) {
          EXPECT_EQ(owners.at(k), -1) << "shard " << k << " held twice";
          EXPECT_EQ(k % ranks, r) << "shard " << k << " of " << ranks << " ranks";
          owners[k] = r;
        }
      }
      EXPECT_EQ(std::count(owners.begin(), owners.end(), -1), 0);
    }
  }
}

// Rank r holds the hits whose patch id is r mod R among ids 0..11, scored by id (lower is
// better), so the merged best k of query q are exactly the ids q .. q + k - 1.
std::vector<std::vector<Hit>> rank_hits(int rank, int ranks, int queries) {
  std::vector<std::vector<Hit>> lists(queries);
  for (int q = 0; q < queries; ++q) {
    for (int id = q; id < 12; ++id) {
      if (id % ranks != rank) continue;
      Hit h;
      h.patch_id = id;
      h.score = static_cast<float>(id);
      h.x = 100 * id;
      h.shard = rank;
      lists[q].push_back(h);
    }
  }
  return lists;
}

class GatherBestHits : public ::testing::TestWithParam<int> {};

TEST_P(GatherBestHits, RankZeroGetsTheBestOfEveryRankPerQuery) {
  const int R = GetParam();
  const std::vector<int> k = {3, 1, 5};
  run_ranks(R, [&](Comm& comm) {
    const auto merged = gather_best_hits(comm, rank_hits(comm.rank(), R, 3), k, false);
    if (comm.rank() != 0) {
      EXPECT_TRUE(merged.empty());
      return 0;
    }
    EXPECT_EQ(merged.size(), 3u);
    for (size_t q = 0; q < merged.size(); ++q) {
      const size_t want = R == 1 ? rank_hits(0, 1, 3)[q].size() : static_cast<size_t>(k[q]);
      EXPECT_EQ(merged[q].size(), want) << "query " << q;
      for (size_t i = 0; i < std::min(want, merged[q].size()); ++i) {
        const int64_t id = static_cast<int64_t>(q + i);
        EXPECT_EQ(merged[q][i].patch_id, id);
        EXPECT_EQ(merged[q][i].x, 100 * id);
        EXPECT_EQ(merged[q][i].shard, id % R) << "a hit keeps its rank's metadata";
      }
    }
    return 0;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GatherBestHits, ::testing::Values(1, 2, 3));

TEST(GatherBestHits, ARankWithAnotherNumberOfQueriesIsAnError) {
  EXPECT_THROW(run_ranks(2,
                         [](Comm& comm) {
                           gather_best_hits(comm, rank_hits(comm.rank(), 2, 1 + comm.rank()),
                                            {3, 3}, false);
                           return 0;
                         }),
               Error);
}

}  // namespace
}  // namespace tessera::search
