// index.h5: IndexWriter's rows, slide table and attributes read back by load_index_info and
// IndexReader; the overlap recorded by patchgen, and the fallback for an index written before it.
#include "common/store/index.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/files.h"
#include "common/store/index_writer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct PatchgenDir {
  fs::path path = fs::temp_directory_path() / ("tessera_index_test_" + std::to_string(getpid()));
  PatchgenDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~PatchgenDir() { fs::remove_all(path); }
  std::string index() const { return (path / kIndexFile).string(); }
};

// Two slides: a with 3 patches, b with 2; metadata column "site".
SlideTable two_slides() {
  SlideTable t;
  t.slide_id = {"a", "b"};
  t.path = {"/s/a.tif", "/s/b.tif"};
  t.path_as_written = {"a.tif", "b.tif"};
  t.patient_id = {"p1", ""};
  t.status = {"ok", "ok"};
  t.reason = {"", ""};
  t.mpp_source = {"file", "manifest"};
  t.vendor = {"generic-tiff", "aperio"};
  t.width = {1000, 2000};
  t.height = {800, 1600};
  t.patch_count = {3, 2};
  t.level = {0, 1};
  t.read_size = {224, 112};
  t.mpp_x = {0.25, 0.5};
  t.mpp_y = {0.25, 0.5};
  t.downsample = {2.0, 4.0};
  t.metadata_columns = {"site"};
  t.metadata = {{"lung", "liver"}};
  return t;
}

IndexAttributes attributes_with_overlap(int64_t overlap) {
  IndexAttributes a;
  a.patch_size = 224;
  a.mpp = 0.5;
  a.encoding = "raw";
  a.num_shards = 2;
  a.config_fingerprint = "fp";
  a.part = 1;
  a.parts = 3;
  a.overlap = overlap;
  return a;
}

void write_index(const PatchgenDir& dir, const IndexAttributes& a) {
  IndexWriter w(dir.index());
  for (int64_t i = 0; i < 3; ++i) w.add(i, 0, 10 * i, 20 * i, 0.5f, static_cast<int32_t>(i % 2), i);
  for (int64_t i = 0; i < 2; ++i) w.add((int64_t{1} << 32) + i, 1, 5 * i, 7, 0.25f, 1, 3 + i);
  EXPECT_EQ(w.rows(), 5);
  w.finish(two_slides(), a);
  atomic_write_file((dir.path / "_SUCCESS").string(), "{\"stage\": \"patchgen\"}\n");
}

TEST(IndexFile, WriterAndReadersRoundTrip) {
  PatchgenDir dir;
  write_index(dir, attributes_with_overlap(32));
  const IndexInfo info = load_index_info(dir.path.string());
  EXPECT_EQ(info.path, dir.index());
  EXPECT_EQ(info.patch_size, 224);
  EXPECT_EQ(info.mpp, 0.5);
  EXPECT_EQ(info.encoding, "raw");
  EXPECT_EQ(info.num_shards, 2);
  EXPECT_EQ(info.part, 1);
  EXPECT_EQ(info.parts, 3);
  EXPECT_EQ(info.overlap, 32);
  EXPECT_EQ(info.config_fingerprint, "fp");
  EXPECT_EQ(info.rows, 5);
  EXPECT_EQ(info.success.at("stage"), "patchgen");
  EXPECT_EQ(info.slides.slide_id, two_slides().slide_id);
  EXPECT_EQ(info.slides.vendor, two_slides().vendor);
  EXPECT_EQ(info.slides.downsample, two_slides().downsample);
  EXPECT_EQ(info.slides.read_size, two_slides().read_size);
  EXPECT_EQ(info.slides.metadata, two_slides().metadata);
  EXPECT_EQ(info.slide_offset, (std::vector<int64_t>{0, 3, 5}));
  EXPECT_EQ(info.shard_path(1), (dir.path / "shards" / "rank-00001.h5").string());

  const IndexReader reader(info.path);
  EXPECT_EQ(reader.rows(), 5);
  const IndexRows range = reader.read_range(2, 2);
  EXPECT_EQ(range.patch_id, (std::vector<int64_t>{2, int64_t{1} << 32}));
  EXPECT_EQ(range.slide, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(range.coords, (std::vector<int64_t>{20, 40, 0, 7}));
  const IndexRows list = reader.read_rows({0, 4});
  EXPECT_EQ(list.patch_id, (std::vector<int64_t>{0, (int64_t{1} << 32) + 1}));
  EXPECT_EQ(list.tissue, (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(list.shard, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(list.row, (std::vector<int64_t>{0, 4}));
}

TEST(IndexFile, OverlapOfPatchSizeAndStride) {
  EXPECT_EQ(patch_overlap(224, 192), 32);
  EXPECT_EQ(patch_overlap(224, 224), 0);
  EXPECT_EQ(patch_overlap(224, 0), 0);
  EXPECT_EQ(patch_overlap(224, 300), 0);
}

// An index.h5 written before patchgen recorded the overlap: the stride of the stage's config.ini
// gives it, as embed read it then; no stride line gives 0.
TEST(IndexFile, IndexWithoutOverlapFallsBackToTheStageConfig) {
  PatchgenDir dir;
  write_index(dir, attributes_with_overlap(0));
  {
    h5::File f = h5::File::open(dir.index(), h5::Mode::kReadWrite);
    ASSERT_GE(H5Adelete(f.id(), "overlap"), 0);
    f.close();
  }
  EXPECT_EQ(load_index_info(dir.path.string()).overlap, 0);
  atomic_write_file((dir.path / "config.ini").string(), "patch-size = 224\nstride = 192\n");
  EXPECT_EQ(load_index_info(dir.path.string()).overlap, 32);
  atomic_write_file((dir.path / "config.ini").string(), "stride = many\n");
  try {
    load_index_info(dir.path.string());
    FAIL() << "a stride that is not a number was taken";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("config.ini"), std::string::npos) << e.what();
  }
}

TEST(IndexFile, IncompleteOrForeignIndexIsRefused) {
  PatchgenDir dir;
  write_index(dir, attributes_with_overlap(0));
  fs::remove(dir.path / "_SUCCESS");
  EXPECT_THROW(load_index_info(dir.path.string()), InvalidInput);
  atomic_write_file((dir.path / "_SUCCESS").string(), "{}\n");
  {
    h5::File f = h5::File::open(dir.index(), h5::Mode::kReadWrite);
    f.set_attr("format_version", kIndexFormatVersion + 1);
    f.close();
  }
  try {
    load_index_info(dir.path.string());
    FAIL() << "an index of another format version was taken";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.index()), std::string::npos) << e.what();
  }
  // A file without the index's columns.
  const std::string other = (dir.path / "other.h5").string();
  {
    h5::File f = h5::File::open(other, h5::Mode::kCreateTruncate);
    f.write_vector<int64_t>(index_names::kPatchId, {1, 2});
    f.close();
  }
  try {
    IndexReader reader(other);
    FAIL() << "a file without the index's columns was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(other), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
