#include "common/store/vector_meta.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/core/error.h"

namespace tessera {
namespace {

// The inference itself is common/core/value_type_test.cpp's.
TEST(MetaType, TextConvertsToTheColumnType) {
  const MetaColumn i = MetaColumn::from_text("age", MetaType::kInt, {"61", "", "+7", "007"});
  EXPECT_EQ(i.ints, (std::vector<int64_t>{61, 0, 7, 7}));
  const MetaColumn f = MetaColumn::from_text("age", MetaType::kFloat, {"1.5", ""});
  EXPECT_EQ(f.floats[0], 1.5);
  EXPECT_TRUE(std::isnan(f.floats[1]));
  EXPECT_EQ(f.text(1), "");
  EXPECT_THROW(MetaColumn::from_text("age", MetaType::kInt, {"x"}), InvalidInput);
  EXPECT_THROW(MetaColumn::from_text("age", MetaType::kInt, {"2.5"}), InvalidInput);
  EXPECT_THROW(MetaColumn::from_text("age", MetaType::kFloat, {"0x1A"}), InvalidInput);
  EXPECT_THROW(MetaColumn::from_text("age", MetaType::kFloat, {"inf"}), InvalidInput);
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

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Issue 21, case 3: `00 00` -> `FF FF` in a meta.h5 chunk passed Fletcher32 (the two are equal
// mod 65535) and query served the changed values; a changed slide table string had no checksum
// at all. Both are refused now, naming the file and what differs.
TEST(VectorMeta, DamageThatFletcher32MissesIsRefused) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera_vector_meta_damage_" + std::to_string(::getpid()) + ".h5"))
                               .string();
  VectorSlideTable t;
  t.slide_id = {"a", "b"};
  t.patient_id = {"P1", "P2"};
  t.path = {"/x/a.tif", "/x/b.tif"};
  t.level = {0, 0};
  t.read_size = {64, 64};
  t.slide_mpp = {0.25, 0.25};
  t.downsample = {2, 2};
  t.metadata.push_back(
      MetaColumn::from_text("site", MetaType::kString, {"lungXsiteX", "colonXsiteX"}));
  VectorRows rows;
  for (int i = 0; i < 100; ++i) {
    rows.patch_id.push_back(i == 42 ? int64_t{0x0000a5a5a5a5a5a5} : i);
    rows.slide.push_back(i % 2);
    rows.coords.push_back(10 * i);
    rows.coords.push_back(20 * i);
    rows.tissue.push_back(0.5f);
  }
  {
    VectorMetaWriter w(path, 0, 64, 0.5);
    w.append(rows, 0, rows.size());
    w.close(t);
  }
  const std::string good = file_bytes(path);
  ASSERT_NO_THROW(read_vector_meta(path));

  // The patch id of row 42: a5 a5 a5 a5 a5 a5 00 00 little-endian; its zero bytes become ff ff.
  const std::string id("\xa5\xa5\xa5\xa5\xa5\xa5\x00\x00", 8);
  const size_t at = good.find(id);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(good.find(id, at + 1), std::string::npos);
  std::string bad = good;
  bad[at + 6] = bad[at + 7] = '\xff';
  put_file_bytes(path, bad);
  try {
    const VectorMeta m = read_vector_meta(path);
    ADD_FAILURE() << "damaged rows were read: patch id " << std::hex << m.rows.patch_id[42];
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/patch_id"), std::string::npos) << e.what();
  }

  // A metadata string of the slide table, changed in place.
  const size_t word = good.find("colonXsiteX");
  ASSERT_NE(word, std::string::npos);
  bad = good;
  bad[word] = 'k';
  put_file_bytes(path, bad);
  for (bool with_rows : {true, false}) {
    try {
      const VectorMeta m = read_vector_meta(path, with_rows);
      ADD_FAILURE() << "a damaged slide table was read: " << m.slides.metadata.at(0).strings.at(1);
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("slide table"), std::string::npos) << e.what();
    }
  }
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
