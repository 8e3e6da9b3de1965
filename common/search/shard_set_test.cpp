#include "common/search/shard_set.h"

#include <gtest/gtest.h>

#include "common/store/columns.h"

namespace tessera::search {
namespace {

Hit hit(float score, int64_t id) {
  Hit h;
  h.score = score;
  h.patch_id = id;
  h.slide = static_cast<int32_t>(id >> 32);
  h.x = id * 10;
  return h;
}

TEST(MergeHits, TakesTheBestOfEveryListAndKeepsTheirMetadata) {
  const std::vector<std::vector<Hit>> lists = {{hit(0.9f, 1), hit(0.5f, 4)},
                                               {hit(0.8f, 2), hit(0.7f, 3)},
                                               {}};
  const std::vector<Hit> best = merge_hits(lists, 3, true);
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(best[0].patch_id, 1);
  EXPECT_EQ(best[1].patch_id, 2);
  EXPECT_EQ(best[2].patch_id, 3);
  EXPECT_EQ(best[2].x, 30);
}

TEST(MergeHits, DistancesAscendAndTiesGoToTheLowerId) {
  const std::vector<std::vector<Hit>> lists = {{hit(1.0f, 9), hit(2.0f, 5)}, {hit(1.0f, 7)}};
  const std::vector<Hit> best = merge_hits(lists, 2, false);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].patch_id, 7);
  EXPECT_EQ(best[1].patch_id, 9);
}

TEST(MergeHits, OrderOfListsDoesNotMatter) {
  std::vector<std::vector<Hit>> a = {{hit(0.3f, 1), hit(0.1f, 2)}, {hit(0.3f, 3), hit(0.2f, 4)}};
  std::vector<std::vector<Hit>> b = {a[1], a[0]};
  const auto x = merge_hits(a, 3, true), y = merge_hits(b, 3, true);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].patch_id, y[i].patch_id);
}

TEST(EncodeHits, RoundTrips) {
  const std::vector<std::vector<Hit>> hits = {{hit(0.5f, (int64_t{3} << 32) | 7)}, {}, {hit(1, 2), hit(0, 1)}};
  const auto back = decode_hits(encode_hits(hits));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_TRUE(back[1].empty());
  ASSERT_EQ(back[2].size(), 2u);
  EXPECT_EQ(back[0][0].patch_id, (int64_t{3} << 32) | 7);
  EXPECT_EQ(back[0][0].slide, 3);
  EXPECT_EQ(back[2][1].patch_id, 1);
  EXPECT_ANY_THROW(decode_hits(encode_hits(hits).substr(0, 20)));
}

TEST(FilterColumns, FixedColumnsThenTypedMetadata) {
  VectorSlideTable slides;
  slides.metadata.push_back(MetaColumn::from_text("site", MetaType::kString, {"lung"}));
  slides.metadata.push_back(MetaColumn::from_text("age", MetaType::kInt, {"61"}));
  slides.metadata.push_back(MetaColumn::from_text("x", MetaType::kInt, {"1"}));  // shadowed
  const auto columns = filter_columns(slides);
  ASSERT_GE(columns.size(), 3u);
  EXPECT_EQ(columns[0].name, "patch_id");
  EXPECT_EQ(columns[columns.size() - 2].name, "site");
  EXPECT_EQ(columns.back().name, "age");
  EXPECT_EQ(columns.back().type, ColumnType::kInt);
  // The filter language accepts them.
  EXPECT_NO_THROW(Filter::parse("site = lung and age > 60 and tissue >= 0.5", columns));
}

// Issue 21, case 4: patchgen refuses metadata columns named like these (common/store/columns.h),
// so the list there must hold every column a filter can name besides the metadata (query's
// report columns: stages/query/report_test.cpp).
TEST(BuiltinColumns, EveryColumnAFilterNamesIsReserved) {
  const VectorSlideTable no_metadata;
  for (const auto& c : filter_columns(no_metadata)) {
    EXPECT_TRUE(is_builtin_column(c.name)) << c.name;
  }
  EXPECT_TRUE(is_builtin_column("Patch_ID"));
  EXPECT_FALSE(is_builtin_column("site"));
}

}  // namespace
}  // namespace tessera::search
