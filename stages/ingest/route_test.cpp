#include "stages/ingest/route.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "common/core/error.h"

namespace tessera::ingest {
namespace {

TEST(RankShards, EveryShardHasExactlyOneRankAndRanksBeyondKHaveNone) {
  for (int K = 1; K <= 7; ++K) {
    for (int R = 1; R <= 9; ++R) {
      std::vector<int> owner(K, -1);
      for (int r = 0; r < R; ++r) {
        const std::vector<int> mine = rank_shards(K, r, R);
        EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
        if (r >= K) EXPECT_TRUE(mine.empty()) << "K=" << K << " R=" << R << " r=" << r;
        for (int k : mine) {
          ASSERT_GE(k, 0);
          ASSERT_LT(k, K);
          EXPECT_EQ(owner[k], -1) << "shard " << k << " built twice";
          owner[k] = r;
          EXPECT_EQ(k % R, r) << "shard k belongs to rank k mod R";
        }
      }
      for (int k = 0; k < K; ++k) EXPECT_GE(owner[k], 0) << "K=" << K << " R=" << R;
    }
  }
}

TEST(PartSlidesOf, KeepsTheSlidesWithRowsInTableOrder) {
  SlideTable t;
  t.slide_id = {"a", "b", "c", "d", "e"};
  t.patch_count = {4, 0, 7, 0, 1};
  const PartSlides p = part_slides_of(t);
  EXPECT_EQ(p.slides, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(p.rows, (std::vector<int64_t>{4, 7, 1}));
  EXPECT_TRUE(part_slides_of(SlideTable{}).slides.empty());
}

// A part of random slides (some empty), as patchgen's index lays them out: each slide's rows
// contiguous, in table order.
struct Part {
  SlideTable table;
  std::vector<int64_t> offset;
  int64_t rows = 0;
};

Part random_part(std::mt19937& rng, int slides) {
  Part p;
  std::uniform_int_distribution<int64_t> count(0, 40);
  for (int s = 0; s < slides; ++s) {
    p.table.slide_id.push_back("s" + std::to_string(s));
    const int64_t n = s % 4 == 1 ? 0 : count(rng);
    p.table.patch_count.push_back(n);
    p.offset.push_back(p.rows);
    p.rows += n;
  }
  return p;
}

std::vector<int> slots_of(int K, int rank, int R) {
  std::vector<int> slot(K, -1);
  int i = 0;
  for (int k : rank_shards(K, rank, R)) slot[k] = i++;
  return slot;
}

// Every row of every part is read by exactly one rank, for the shard its slide was placed on, and
// each rank's ranges are in index order.
TEST(RankRowRanges, BySlideEveryRowGoesOnceToTheRankBuildingItsSlidesShard) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<Part> parts = {random_part(rng, 1 + trial % 9), random_part(rng, 5)};
    std::vector<PartSlides> slides;
    for (const Part& p : parts) slides.push_back(part_slides_of(p.table));
    for (int K = 1; K <= 5; ++K) {
      std::vector<int64_t> fill(K, 0);
      const auto placed = assign_by_slide(slides, fill);
      for (int R = 1; R <= 6; ++R) {
        for (size_t s = 0; s < parts.size(); ++s) {
          std::vector<int> shard_of_row(parts[s].rows, -2);
          for (int r = 0; r < R; ++r) {
            const std::vector<int> slot = slots_of(K, r, R);
            const auto ranges = rank_row_ranges(Assign::kBySlide, slides[s], placed[s],
                                                parts[s].offset, parts[s].rows, slot);
            int64_t previous_end = 0;
            for (const RowRange& range : ranges) {
              EXPECT_GE(range.first, previous_end) << "ranges out of index order";
              previous_end = range.first + range.count;
              ASSERT_GE(range.shard, 0);
              EXPECT_GE(slot[range.shard], 0) << "rank " << r << " reads for a shard not its own";
              for (int64_t i = range.first; i < range.first + range.count; ++i) {
                EXPECT_EQ(shard_of_row[i], -2) << "row " << i << " read twice";
                shard_of_row[i] = range.shard;
              }
            }
          }
          for (size_t i = 0; i < slides[s].slides.size(); ++i) {
            const int32_t slide = slides[s].slides[i];
            for (int64_t row = parts[s].offset[slide];
                 row < parts[s].offset[slide] + slides[s].rows[i]; ++row) {
              EXPECT_EQ(shard_of_row[row], placed[s][i]) << "K=" << K << " R=" << R;
            }
          }
          for (int64_t row = 0; row < parts[s].rows; ++row) {
            EXPECT_NE(shard_of_row[row], -2) << "row " << row << " read by no rank";
          }
        }
      }
    }
  }
}

// Cyclic: a rank that builds shards reads every row and keeps those cyclic_shard gives its
// shards; over the ranks, every row lands in exactly one shard.
TEST(RankRowRanges, CyclicEveryRankWithShardsReadsEveryRowAndKeepsItsOwn) {
  std::mt19937 rng(11);
  const Part part = random_part(rng, 6);
  const PartSlides slides = part_slides_of(part.table);
  for (int K = 1; K <= 5; ++K) {
    for (int R = 1; R <= 7; ++R) {
      std::vector<int> kept(part.rows, 0);
      for (int r = 0; r < R; ++r) {
        const std::vector<int> slot = slots_of(K, r, R);
        const auto ranges =
            rank_row_ranges(Assign::kCyclic, slides, {}, part.offset, part.rows, slot);
        if (r >= K) {
          EXPECT_TRUE(ranges.empty()) << "a rank without shards reads nothing";
          continue;
        }
        ASSERT_EQ(ranges.size(), 1u);
        EXPECT_EQ(ranges[0].first, 0);
        EXPECT_EQ(ranges[0].count, part.rows);
        EXPECT_EQ(ranges[0].shard, -1);
        for (int64_t i = 0; i < part.rows; ++i) {
          if (slot[cyclic_shard(i, K)] >= 0) ++kept[i];
        }
      }
      for (int64_t i = 0; i < part.rows; ++i) EXPECT_EQ(kept[i], 1) << "row " << i;
    }
  }
}

TEST(RankRowRanges, BySlideNeedsAPlacementPerSlide) {
  SlideTable t;
  t.slide_id = {"a", "b"};
  t.patch_count = {3, 2};
  EXPECT_THROW(rank_row_ranges(Assign::kBySlide, part_slides_of(t), {0}, {0, 3}, 5, {0}), Error);
}

}  // namespace
}  // namespace tessera::ingest
