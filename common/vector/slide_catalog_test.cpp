// The slide-level index's slide_catalog.json: written and loaded back, and refused when missing,
// incomplete, stale, malformed, of another version, or when a file it seals was changed.
#include "common/vector/slide_catalog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "common/stage/skeleton.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct SlideIndexDir {
  fs::path path = fs::temp_directory_path() / ("tessera_slide_catalog_test_" + std::to_string(getpid()));
  SlideIndexDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~SlideIndexDir() { fs::remove_all(path); }
  std::string dir() const { return path.string(); }
};

SlideCatalog patient_index() {
  SlideCatalog c;
  c.level = "patient";
  c.source = "../../slides/mean-vit";
  c.index_spec = "Flat";
  c.metric = "ip";
  c.normalize = true;
  c.dim = 8;
  c.rows = 5;
  c.encoder = "mean-vit";
  return c;
}

// What ingest --level leaves: the index and entries, the catalog, and _SUCCESS sealing them.
void complete(const SlideIndexDir& d) {
  atomic_write_file((d.path / kSlideVectorsFile).string(), "index bytes");
  atomic_write_file((d.path / kSlideEntriesFile).string(), "entries bytes");
  write_slide_catalog(d.dir(), patient_index());
  nlohmann::json outputs = nlohmann::json::array();
  for (const char* file : {kSlideVectorsFile, kSlideEntriesFile, kSlideCatalogFile}) {
    outputs.push_back(seal_output(d.dir(), file).to_json());
  }
  atomic_write_file((d.path / kRunFile).string(),
                    nlohmann::json{{"world_size", 1}, {"config_fingerprint", "f"}}.dump());
  nlohmann::json marker = marker_base("ingest", 0, 1, "f");
  marker["outputs"] = nlohmann::json::array();
  fs::create_directories(fs::path(marker_path(d.dir(), 0)).parent_path());
  atomic_write_file(marker_path(d.dir(), 0), marker.dump());
  atomic_write_file((d.path / kSuccessFile).string(),
                    nlohmann::json{{"outputs", outputs}}.dump() + "\n");
}

TEST(SlideCatalog, RoundTripsThroughItsFile) {
  SlideIndexDir d;
  EXPECT_FALSE(has_slide_catalog(d.dir()));
  complete(d);
  EXPECT_TRUE(has_slide_catalog(d.dir()));
  const SlideCatalog c = load_slide_catalog(d.dir());
  const SlideCatalog w = patient_index();
  EXPECT_EQ(c.dir, d.dir());
  EXPECT_EQ(c.level, w.level);
  EXPECT_EQ(c.source, w.source);
  EXPECT_EQ(c.index_spec, w.index_spec);
  EXPECT_EQ(c.metric, w.metric);
  EXPECT_EQ(c.normalize, w.normalize);
  EXPECT_EQ(c.dim, w.dim);
  EXPECT_EQ(c.rows, w.rows);
  EXPECT_EQ(c.encoder, w.encoder);
  EXPECT_EQ(c.index_file, "vectors.faiss");
  EXPECT_EQ(c.entries_file, "entries.h5");
  EXPECT_EQ(c.path(c.entries_file), (d.path / "entries.h5").string());
  EXPECT_EQ(c.path(c.source), (d.path.parent_path().parent_path() / "slides/mean-vit").string());
}

TEST(SlideCatalog, MissingIncompleteOrStaleIsBadInput) {
  SlideIndexDir d;
  EXPECT_THROW(load_slide_catalog(d.dir()), InvalidInput);
  complete(d);
  fs::remove(d.path / kSuccessFile);
  EXPECT_THROW(load_slide_catalog(d.dir()), InvalidInput);
  complete(d);
  atomic_write_file((d.path / kStaleFile).string(), "{\"reason\": \"aggregate --overwrite\"}\n");
  try {
    load_slide_catalog(d.dir());
    FAIL() << "a stale slide index was loaded";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("aggregate --overwrite"), std::string::npos) << e.what();
  }
}

TEST(SlideCatalog, MalformedOtherVersionOrDamagedIsAnIoError) {
  SlideIndexDir d;
  complete(d);
  atomic_write_file((d.path / kSlideEntriesFile).string(), "entries bytez");
  try {
    load_slide_catalog(d.dir());
    FAIL() << "a damaged slide index was loaded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(kSlideEntriesFile), std::string::npos) << e.what();
  }
  const std::string file = (d.path / kSlideCatalogFile).string();
  nlohmann::json j = nlohmann::json::parse(read_file(file));
  j["format_version"] = kSlideCatalogFormatVersion + 1;
  atomic_write_file(file, j.dump());
  EXPECT_THROW(load_slide_catalog(d.dir()), IoError);
  j["format_version"] = kSlideCatalogFormatVersion;
  j.erase("entries_file");
  atomic_write_file(file, j.dump());
  EXPECT_THROW(load_slide_catalog(d.dir()), IoError);
  atomic_write_file(file, "{not json");
  EXPECT_THROW(load_slide_catalog(d.dir()), IoError);
}

}  // namespace
}  // namespace tessera
