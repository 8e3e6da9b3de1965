#include "stages/aggregate/items.h"

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera::aggregate {
namespace {

SlideTable table(const std::vector<std::string>& ids, const std::vector<std::string>& patients,
                 const std::vector<int64_t>& patches, const std::vector<std::string>& labels) {
  SlideTable t;
  t.slide_id = ids;
  t.patient_id = patients;
  t.patch_count = patches;
  for (const auto p : patches) {
    t.status.push_back(p > 0 ? "ok" : "empty");
    t.reason.push_back(p > 0 ? "" : "no tissue detected");
  }
  t.metadata_columns = {"diagnosis"};
  t.metadata = {labels};
  return t;
}

TEST(Items, SlideLevelSkipsSlidesWithoutPatches) {
  const SlideTable t = table({"a", "b", "c"}, {"p1", "p1", ""}, {5, 0, 2}, {"x", "x", "y"});
  const ItemList list = make_items({{"/r/embed/t", &t}}, Level::kSlide);
  ASSERT_EQ(list.items.size(), 3u);
  EXPECT_EQ(list.label_columns, std::vector<std::string>{"diagnosis"});
  EXPECT_EQ(list.items[0].id, "a");
  EXPECT_EQ(list.items[0].slides.at(0).features_path, "/r/embed/t/features/a.h5");
  EXPECT_EQ(list.items[0].patches, 5);
  EXPECT_EQ(list.items[1].skip_reason, "no patches: empty (no tissue detected)");
  EXPECT_TRUE(list.items[1].slides.empty());
  EXPECT_EQ(list.items[2].labels, std::vector<std::string>{"y"});
  EXPECT_TRUE(list.items[2].skip_reason.empty());
}

TEST(Items, PatientLevelJoinsSlidesAcrossParts) {
  const SlideTable t0 = table({"a", "b"}, {"p2", "p1"}, {5, 3}, {"x", "y"});
  const SlideTable t1 = table({"c", "d", "e", "f"}, {"p1", "", "p3", "bad id"},
                              {4, 1, 0, 2}, {"z", "w", "x", "x"});
  const ItemList list = make_items({{"/e/part-0", &t0}, {"/e/part-1", &t1}}, Level::kPatient);
  ASSERT_EQ(list.items.size(), 5u);  // p2, p1, d (no patient), p3, "bad id"
  EXPECT_EQ(list.items[0].id, "p2");
  EXPECT_EQ(list.items[1].id, "p1");
  EXPECT_EQ(list.items[1].slide_ids, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(list.items[1].patches, 7);
  EXPECT_EQ(list.items[1].slides.at(1).features_path, "/e/part-1/features/c.h5");
  EXPECT_EQ(list.items[1].labels, std::vector<std::string>{"y|z"});
  EXPECT_EQ(list.items[2].id, "d");
  EXPECT_EQ(list.items[2].skip_reason, "no patient_id");
  EXPECT_EQ(list.items[3].skip_reason, "no patches in any of its 1 slides");
  EXPECT_NE(list.items[4].skip_reason.find("not a safe file name"), std::string::npos);
}

// As patchgen writes parts: each part's table lists the whole manifest, the other part's slides
// with status "other_part" and no patches.
TEST(Items, EachSlideComesFromThePartThatMadeIt) {
  SlideTable t0 = table({"a", "b", "c"}, {"p1", "p2", "p1"}, {5, 0, 2}, {"x", "y", "x"});
  SlideTable t1 = t0;
  t0.status[1] = kOtherPartStatus;
  t0.patch_count[1] = 0;
  t1.status = {kOtherPartStatus, "ok", kOtherPartStatus};
  t1.patch_count = {0, 4, 0};
  t1.reason = {"", "", ""};
  for (const Level level : {Level::kSlide, Level::kPatient}) {
    const ItemList list = make_items({{"/e/part-0", &t0}, {"/e/part-1", &t1}}, level);
    for (const auto& item : list.items) EXPECT_EQ(item.skip_reason, "") << item.id;
    if (level == Level::kSlide) {
      ASSERT_EQ(list.items.size(), 3u);
      EXPECT_EQ(list.items[1].id, "b");
      EXPECT_EQ(list.items[1].patches, 4);
      EXPECT_EQ(list.items[1].slides.at(0).features_path, "/e/part-1/features/b.h5");
    } else {
      ASSERT_EQ(list.items.size(), 2u);
      EXPECT_EQ(list.items[0].slide_ids, (std::vector<std::string>{"a", "c"}));
      EXPECT_EQ(list.items[0].patches, 7);
      EXPECT_EQ(list.items[1].slide_ids, std::vector<std::string>{"b"});
    }
  }
}

TEST(Items, PartsMustShareTheirColumns) {
  SlideTable t0 = table({"a"}, {"p"}, {1}, {"x"});
  SlideTable t1 = table({"b"}, {"q"}, {1}, {"x"});
  t1.metadata_columns = {"site"};
  EXPECT_THROW(make_items({{"/e/0", &t0}, {"/e/1", &t1}}, Level::kSlide), InvalidInput);
}

}  // namespace
}  // namespace tessera::aggregate
