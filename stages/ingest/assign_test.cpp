#include "stages/ingest/assign.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera::ingest {
namespace {

PartSlides part_of(std::vector<int64_t> rows, int32_t first_slide) {
  PartSlides p;
  p.rows = std::move(rows);
  for (size_t i = 0; i < p.rows.size(); ++i) p.slides.push_back(first_slide + static_cast<int32_t>(i));
  return p;
}

TEST(AssignBySlide, PlacesOnTheLeastFilledShardLowestFirstOnTies) {
  std::vector<int64_t> fill(3, 0);
  auto placed = assign_by_slide({part_of({10, 5, 5, 7, 1}, 0)}, fill);
  ASSERT_EQ(placed.size(), 1u);
  // 10 -> 0; 5 -> 1; 5 -> 2; 7 -> 1 (5 < 10, tie 1 vs 2 goes to 1); 1 -> 2.
  EXPECT_EQ(placed[0], (std::vector<int>{0, 1, 2, 1, 2}));
  EXPECT_EQ(fill, (std::vector<int64_t>{10, 12, 6}));
}

TEST(AssignBySlide, BalancesRandomCohortsWithinTheLargestSlide) {
  std::mt19937_64 rng(7);
  for (int K : {1, 2, 3, 4, 8}) {
    std::uniform_int_distribution<int64_t> rows(1, 5000);
    std::vector<int64_t> counts(400);
    for (auto& c : counts) c = rows(rng);
    std::vector<int64_t> fill(K, 0);
    assign_by_slide({part_of(counts, 0)}, fill);
    const int64_t largest = *std::max_element(counts.begin(), counts.end());
    const auto [lo, hi] = std::minmax_element(fill.begin(), fill.end());
    EXPECT_LE(*hi - *lo, largest) << "K=" << K;
    EXPECT_EQ(std::accumulate(fill.begin(), fill.end(), int64_t{0}),
              std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  }
}

TEST(AssignBySlide, AppendingAPartPlacesSlidesAsIngestingBothDoes) {
  const PartSlides p0 = part_of({30, 2, 17, 9}, 0), p1 = part_of({4, 40, 1, 12, 8}, 4);
  std::vector<int64_t> both(4, 0);
  const auto together = assign_by_slide({p0, p1}, both);
  std::vector<int64_t> fill(4, 0);
  const auto first = assign_by_slide({p0}, fill);
  const auto second = assign_by_slide({p1}, fill);
  EXPECT_EQ(first[0], together[0]);
  EXPECT_EQ(second[0], together[1]);
  EXPECT_EQ(fill, both);
}

TEST(AssignBySlide, IsDeterministic) {
  const PartSlides p = part_of({5, 5, 5, 5, 3, 3, 8}, 0);
  std::vector<int64_t> a(3, 0), b(3, 0);
  EXPECT_EQ(assign_by_slide({p}, a), assign_by_slide({p}, b));
}

TEST(AssignCyclic, RowIGoesToShardIModK) {
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(cyclic_shard(i, 3), static_cast<int>(i % 3));
  EXPECT_EQ(cyclic_shard(int64_t{1} << 40, 7), static_cast<int>((int64_t{1} << 40) % 7));
}

TEST(Assign, ParsesItsNames) {
  EXPECT_EQ(parse_assign("by-slide"), Assign::kBySlide);
  EXPECT_EQ(parse_assign("cyclic"), Assign::kCyclic);
  EXPECT_STREQ(to_string(Assign::kCyclic), "cyclic");
  EXPECT_THROW(parse_assign("random"), InvalidInput);
}

}  // namespace
}  // namespace tessera::ingest
