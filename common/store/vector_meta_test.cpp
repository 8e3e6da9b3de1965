#include "common/store/vector_meta.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "common/core/error.h"

namespace tessera {
namespace {

TEST(MetaType, InfersTheNarrowestTypeEveryValueFits) {
  EXPECT_EQ(infer_meta_type({"1", "-20", ""}), MetaType::kInt);
  EXPECT_EQ(infer_meta_type({"1", "2.5"}), MetaType::kFloat);
  EXPECT_EQ(infer_meta_type({"1e3", "7"}), MetaType::kFloat);
  EXPECT_EQ(infer_meta_type({"lung", "1"}), MetaType::kString);
  EXPECT_EQ(infer_meta_type({"", ""}), MetaType::kString);
  EXPECT_EQ(infer_meta_type({"inf"}), MetaType::kString);
  EXPECT_EQ(infer_meta_type({"007"}), MetaType::kInt);
  const MetaColumn f = MetaColumn::from_text("age", MetaType::kFloat, {"1.5", ""});
  EXPECT_EQ(f.floats[0], 1.5);
  EXPECT_TRUE(std::isnan(f.floats[1]));
  EXPECT_EQ(f.text(1), "");
  EXPECT_THROW(MetaColumn::from_text("age", MetaType::kInt, {"x"}), InvalidInput);
}

TEST(VectorMeta, RoundTripsRowsAndTheTypedSlideTable) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera_vector_meta_" + std::to_string(::getpid()) + ".h5"))
                               .string();
  VectorSlideTable t;
  t.slide_id = {"a", "b"};
  t.patient_id = {"P1", ""};
  t.path = {"/x/a.tif", "/x/b.tif"};
  t.level = {0, -1};
  t.read_size = {64, 0};
  t.slide_mpp = {0.25, 0};
  t.downsample = {2, 0};
  t.metadata.push_back(MetaColumn::from_text("site", MetaType::kString, {"lung", "colon"}));
  t.metadata.push_back(MetaColumn::from_text("age", MetaType::kInt, {"61", "48"}));
  VectorRows rows;
  for (int i = 0; i < 5; ++i) {
    rows.patch_id.push_back((int64_t{i % 2} << 32) | i);
    rows.slide.push_back(i % 2);
    rows.coords.push_back(10 * i);
    rows.coords.push_back(20 * i);
    rows.tissue.push_back(0.1f * i);
  }
  {
    VectorMetaWriter w(path, 3, 64, 0.5);
    w.append(rows, 0, 2);
    w.append(rows, 2, 3);
    EXPECT_EQ(w.rows(), 5);
    w.close(t);
  }
  const VectorMeta m = read_vector_meta(path);
  EXPECT_EQ(m.shard, 3);
  EXPECT_EQ(m.patch_size, 64);
  EXPECT_EQ(m.mpp, 0.5);
  EXPECT_EQ(m.rows.patch_id, rows.patch_id);
  EXPECT_EQ(m.rows.coords, rows.coords);
  EXPECT_EQ(m.rows.tissue, rows.tissue);
  EXPECT_EQ(m.slides.slide_id, t.slide_id);
  EXPECT_EQ(m.slides.level, t.level);
  ASSERT_EQ(m.slides.metadata.size(), 2u);
  EXPECT_EQ(m.slides.metadata[1].type, MetaType::kInt);
  EXPECT_EQ(m.slides.metadata[1].ints, (std::vector<int64_t>{61, 48}));
  EXPECT_EQ(m.slides.metadata[0].strings[1], "colon");
  EXPECT_TRUE(read_vector_meta(path, false).rows.patch_id.empty());
  std::filesystem::remove(path);
}

TEST(VectorSlideTables, MergeFillsSlidesOfOtherPartsAndRefusesOtherManifests) {
  VectorSlideTable a, b;
  a.slide_id = b.slide_id = {"s0", "s1"};
  a.level = {0, -1};
  b.level = {-1, 2};
  a.read_size = {64, 0};
  b.read_size = {0, 128};
  a.slide_mpp = {0.5, 0};
  b.slide_mpp = {0, 0.25};
  a.downsample = {1, 0};
  b.downsample = {0, 4};
  merge_slide_table(a, b, "b");
  EXPECT_EQ(a.level, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(a.read_size[1], 128);
  b.slide_id = {"s0", "other"};
  EXPECT_THROW(merge_slide_table(a, b, "b"), IoError);
}

}  // namespace
}  // namespace tessera
