// embed's per-slide feature files: SlideFeaturesWriter's rows and attributes read back by
// read_slide_features (what aggregate and query read), and the refusals of the reader.
#include "common/store/slide_features.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct FeaturesDir {
  fs::path path = fs::temp_directory_path() / ("tessera_slide_features_test_" + std::to_string(getpid()));
  FeaturesDir() {
    fs::remove_all(path);
    fs::create_directories(slide_features_dir(path.string()));
  }
  ~FeaturesDir() { fs::remove_all(path); }
};

SlideFeaturesHeader header_of(const std::string& slide_id) {
  SlideFeaturesHeader h;
  h.slide_id = slide_id;
  h.patch_size = 224;
  h.patch_level = 1;
  h.read_size = 112;
  h.mpp = 0.5;
  h.downsample = 4.0;
  h.model_fingerprint = "{}";
  h.encoder = "vit";
  h.coords = {224, 448, 40.0, 20.0, 32, 4000, 3000, "ignored"};
  h.coords.name = slide_id;
  return h;
}

TEST(SlideFeaturesFile, WriterRoundTripsThroughTheReader) {
  FeaturesDir dir;
  const std::string path = slide_features_path(dir.path.string(), "S1");
  SlideFeaturesWriter w(path, 2, header_of("S1"));
  const std::vector<float> f1 = {1, 2, 3, 4};
  const std::vector<int64_t> c1 = {0, 0, 224, 0};
  w.append(f1.data(), c1.data(), 2);
  const std::vector<float> f2 = {5, 6};
  const std::vector<int64_t> c2 = {0, 224};
  w.append(f2.data(), c2.data(), 1);
  EXPECT_FALSE(fs::exists(path));  // under path.tmp until committed
  w.commit();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const SlideFeatures s = read_slide_features(path);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.dim, 2);
  EXPECT_EQ(s.features, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.coords, (std::vector<int64_t>{0, 0, 224, 0, 0, 224}));
  EXPECT_EQ(s.attributes.patch_size, 224);
  EXPECT_EQ(s.attributes.patch_size_level0, 448);
  EXPECT_EQ(s.attributes.level0_magnification, 40.0);
  EXPECT_EQ(s.attributes.target_magnification, 20.0);
  EXPECT_EQ(s.attributes.overlap, 32);
  EXPECT_EQ(s.attributes.level0_width, 4000);
  EXPECT_EQ(s.attributes.level0_height, 3000);
  EXPECT_EQ(s.attributes.name, "S1");
  const h5::File f = h5::File::open(path, h5::Mode::kRead);
  EXPECT_EQ(f.attr_string("slide_id"), "S1");
  EXPECT_EQ(f.attr_int("patch_level"), 1);
  EXPECT_EQ(f.attr_int("read_size"), 112);
  EXPECT_EQ(f.open_dataset(embedding_names::kFeatures).attr_string("encoder"), "vit");
}

// A slide without patches: [0, D] features and [0, 2] coords.
TEST(SlideFeaturesFile, EmptySlideHasNoRows) {
  FeaturesDir dir;
  const std::string path = slide_features_path(dir.path.string(), "empty");
  SlideFeaturesWriter w(path, 4, header_of("empty"));
  w.commit();
  const SlideFeatures s = read_slide_features(path);
  EXPECT_EQ(s.rows, 0);
  EXPECT_EQ(s.dim, 4);
}

TEST(SlideFeaturesFile, ReaderRefusesMissingOrMismatchedFilesNamingThem) {
  FeaturesDir dir;
  const std::string missing = slide_features_path(dir.path.string(), "none");
  const std::string odd = slide_features_path(dir.path.string(), "odd");
  {
    h5::File f = h5::File::open(odd, h5::Mode::kCreateTruncate);
    const std::vector<float> features = {1, 2, 3, 4};
    const std::vector<int64_t> coords = {0, 0};
    f.write_dataset(embedding_names::kFeatures, h5::Type::kFloat32, {2, 2}, features.data());
    f.write_dataset(embedding_names::kCoords, h5::Type::kInt64, {1, 2}, coords.data());
    f.close();
  }
  for (const std::string& path : {missing, odd}) {
    try {
      read_slide_features(path);
      FAIL() << path << " was read";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST(SlideFeaturesFile, WriterIntoAMissingFolderNamesTheFile) {
  FeaturesDir dir;
  const std::string path = (dir.path / "no" / "such" / "S1.h5").string();
  try {
    SlideFeaturesWriter w(path, 2, header_of("S1"));
    FAIL() << "a features file was created in a missing folder";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// aggregate's TRIDENT slide file: the vector, the coords with the attributes of the patch file
// (named for the item), and the root attributes by type, under path.tmp until complete.
TEST(TridentSlideFile, WritesTheVectorCoordsAndAttributes) {
  FeaturesDir dir;
  const std::string path = (dir.path / "P1.h5").string();
  const CoordsAttributes a = header_of("S1").coords;
  write_trident_slide_file(path, "P1", "/out/slide_features_mean", {0.5f, 1.5f, 2.5f},
                           {0, 0, 224, 0}, a,
                           {{"level", "patient"}, {"patches", 2}, {"scale", 0.25}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const h5::File f = h5::File::open(path, h5::Mode::kRead);
  const h5::Dataset features = f.open_dataset(embedding_names::kFeatures);
  EXPECT_EQ(features.read_all<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(features.attr_string("name"), "P1");
  EXPECT_EQ(features.attr_string("savetodir"), "/out/slide_features_mean");
  const h5::Dataset coords = f.open_dataset(embedding_names::kCoords);
  EXPECT_EQ(coords.read_all<int64_t>(), (std::vector<int64_t>{0, 0, 224, 0}));
  EXPECT_EQ(coords.attr_int("overlap"), 32);
  EXPECT_EQ(coords.attr_int("patch_size_level0"), 448);
  EXPECT_EQ(coords.attr_string("name"), "P1");
  EXPECT_EQ(f.attr_string("level"), "patient");
  EXPECT_EQ(f.attr_int("patches"), 2);
  EXPECT_EQ(f.attr_double("scale"), 0.25);
  const std::string missing = (dir.path / "no" / "P1.h5").string();
  try {
    write_trident_slide_file(missing, "P1", "x", {1.0f}, {}, a, nlohmann::json::object());
    FAIL() << "a slide file was written into a missing folder";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
