// aggregate's exchanged files: the cohort file (slides.h5 / patients.h5) and the rank vector
// files, written and read back, and refused when damaged or of another version.
#include "common/store/slide_vectors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/h5/h5.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct SlidesDir {
  fs::path path = fs::temp_directory_path() / ("tessera_slide_vectors_test_" + std::to_string(getpid()));
  SlidesDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~SlidesDir() { fs::remove_all(path); }
};

CohortVectors patient_cohort() {
  CohortVectors c;
  c.level = "patient";
  c.encoder = "mean-vit";
  c.patch_encoder = "vit";
  c.method = "mean";
  c.embed_tag = "vit";
  c.dim = 2;
  c.ids = {"p1", "p2"};
  c.patient_id = {"p1", "p2"};
  c.slides = {"a|b", "c"};
  c.n_patches = {7, 3};
  c.features = {1, 2, 3, 4};
  c.label_columns = {"diagnosis"};
  c.labels = {{"tumour|stroma", "fat"}};
  c.skipped_ids = {"p3"};
  c.skipped_reasons = {"no patches"};
  return c;
}

TEST(CohortFile, NamesAndRoundTrip) {
  EXPECT_EQ(cohort_file_name("slide"), "slides.h5");
  EXPECT_EQ(cohort_file_name("patient"), "patients.h5");
  SlidesDir dir;
  const std::string path = (dir.path / cohort_file_name("patient")).string();
  write_cohort_vectors(path, patient_cohort());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const CohortVectors c = read_cohort_vectors(path);
  const CohortVectors w = patient_cohort();
  EXPECT_EQ(c.level, w.level);
  EXPECT_EQ(c.encoder, w.encoder);
  EXPECT_EQ(c.patch_encoder, w.patch_encoder);
  EXPECT_EQ(c.method, w.method);
  EXPECT_EQ(c.embed_tag, w.embed_tag);
  EXPECT_EQ(c.dim, 2);
  EXPECT_EQ(c.ids, w.ids);
  EXPECT_EQ(c.slides, w.slides);
  EXPECT_EQ(c.n_patches, w.n_patches);
  EXPECT_EQ(c.features, w.features);
  EXPECT_EQ(c.label_columns, w.label_columns);
  EXPECT_EQ(c.labels, w.labels);
  EXPECT_EQ(c.skipped_ids, w.skipped_ids);
  EXPECT_EQ(c.skipped_reasons, w.skipped_reasons);
  EXPECT_EQ(c.find("p2"), 1);
  EXPECT_EQ(c.find("p9"), -1);
  ASSERT_NE(c.label("diagnosis"), nullptr);
  EXPECT_EQ(c.label("site"), nullptr);
}

TEST(CohortFile, OtherVersionOrInconsistentRowsAreRefusedNamingTheFile) {
  SlidesDir dir;
  const std::string path = (dir.path / "slides.h5").string();
  write_cohort_vectors(path, patient_cohort());
  {
    h5::File f = h5::File::open(path, h5::Mode::kReadWrite);
    f.set_attr("format_version", kCohortFileFormatVersion + 1);
    f.close();
  }
  try {
    read_cohort_vectors(path);
    FAIL() << "a cohort file of another version was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  CohortVectors short_features = patient_cohort();
  short_features.features.resize(2);
  short_features.ids = {"p1"};
  short_features.label_columns.clear();
  short_features.labels.clear();
  write_cohort_vectors(path, short_features);  // ids [1], but patient_id, slides [2]
  try {
    read_cohort_vectors(path);
    FAIL() << "a cohort file with rows of different lengths was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("inconsistent"), std::string::npos) << e.what();
  }
}

TEST(RankVectorsFile, RoundTripAndInconsistentRowsRefused) {
  SlidesDir dir;
  const std::string path = (dir.path / "rank-00000.h5").string();
  RankVectors v;
  v.items = {0, 5};
  v.n_patches = {4, 9};
  v.vectors = {1, 2, 3, 4, 5, 6};
  v.dim = 3;
  write_rank_vectors(path, v);
  const RankVectors r = read_rank_vectors(path);
  EXPECT_EQ(r.items, v.items);
  EXPECT_EQ(r.n_patches, v.n_patches);
  EXPECT_EQ(r.vectors, v.vectors);
  EXPECT_EQ(r.dim, 3);
  v.n_patches = {4};
  write_rank_vectors(path, v);
  try {
    read_rank_vectors(path);
    FAIL() << "a rank vector file with rows of different lengths was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
