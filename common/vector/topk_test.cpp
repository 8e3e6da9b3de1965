#include "common/vector/topk.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<int64_t> ids_of(const std::vector<Neighbor>& list) {
  std::vector<int64_t> ids;
  for (const auto& n : list) ids.push_back(n.id);
  return ids;
}

TEST(MergeTopk, TakesGlobalBestForBothDirections) {
  const std::vector<std::vector<Neighbor>> lists = {
      {{0.9f, 1}, {0.5f, 2}, {0.1f, 3}}, {{0.8f, 10}, {0.7f, 11}}, {{0.95f, 20}}};
  EXPECT_EQ(ids_of(merge_topk(lists, 3, true)), (std::vector<int64_t>{20, 1, 10}));
  const std::vector<std::vector<Neighbor>> l2 = {{{0.1f, 1}, {0.5f, 2}}, {{0.2f, 10}, {0.3f, 11}}};
  EXPECT_EQ(ids_of(merge_topk(l2, 3, false)), (std::vector<int64_t>{1, 10, 11}));
}

TEST(MergeTopk, BreaksTiesByAscendingIdWhateverTheListOrder) {
  std::vector<std::vector<Neighbor>> lists = {
      {{1.0f, 40}, {0.5f, 7}}, {{1.0f, 12}, {1.0f, 30}}, {{1.0f, 5}}, {{0.5f, 2}}};
  const std::vector<int64_t> expected = {5, 12, 30, 40, 2};
  std::mt19937 rng(3);
  for (int round = 0; round < 10; ++round) {
    std::shuffle(lists.begin(), lists.end(), rng);
    EXPECT_EQ(ids_of(merge_topk(lists, 5, true)), expected);
  }
}

TEST(MergeTopk, DropsEmptySlotsAndReturnsFewerWhenShort) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<Neighbor>> lists = {{{0.3f, 4}, {inf, -1}, {inf, -1}},
                                                    {{0.1f, 9}, {inf, -1}}};
  const auto merged = merge_topk(lists, 5, false);
  EXPECT_EQ(ids_of(merged), (std::vector<int64_t>{9, 4}));
  EXPECT_TRUE(merge_topk({}, 3, true).empty());
  EXPECT_TRUE(merge_topk(lists, 0, true).empty());
}

}  // namespace
}  // namespace tessera
