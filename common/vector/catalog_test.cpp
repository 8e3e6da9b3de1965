#include "common/vector/catalog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("tessera_catalog_test_" + std::to_string(::getpid()));
  Dir() {
    fs::remove_all(path);
    fs::create_directories(path / "gen-00000");
  }
  ~Dir() { fs::remove_all(path); }
};

Catalog sample(const std::string& dir) {
  Catalog c;
  c.dir = dir;
  c.tag = "vit-tiny";
  c.index_spec = "IVF4,Flat";
  c.metric = "ip";
  c.normalize = true;
  c.assign = "by-slide";
  c.dim = 8;
  c.embed_parts = 2;
  c.default_nprobe = 4;
  c.patch_size = 64;
  c.mpp = 0.5;
  c.store_dtype = "fp32";
  c.model = {{"model", "vit-tiny"}};
  c.created = c.updated = "2026-11-30T00:00:00.000Z";
  c.shards.resize(2);
  for (int k = 0; k < 2; ++k) {
    const std::string file = "gen-00000/shard-" + std::to_string(k);
    atomic_write_file(dir + "/" + file, std::string(100 + k, 'x'));
    CatalogSegment seg;
    seg.rows = 10 + k;
    seg.index = seal_output(dir, file);
    seg.meta = seg.index;
    c.shards[k].rows = seg.rows;
    c.shards[k].segments.push_back(seg);
  }
  c.sources.push_back({1, 0, 21, "../../embed/vit-tiny/part-00001-of-00002",
                       "../../patchgen/part-00001-of-00002", "e", "p"});
  c.generations.push_back({0, "gen-00000", {1}, 21, "f", "2026-11-30T00:00:00.000Z"});
  return c;
}

TEST(Catalog, RoundTripsThroughItsFile) {
  Dir d;
  const Catalog c = sample(d.path.string());
  write_catalog(c);
  const Catalog back = load_catalog(d.path.string());
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(back.rows(), 21);
  EXPECT_EQ(back.parts_in(), std::vector<int>{1});
  EXPECT_EQ(back.path("gen-00000/x"), (d.path / "gen-00000/x").string());
}

TEST(Catalog, MissingIsBadInputMalformedIsAnIoError) {
  Dir d;
  EXPECT_THROW(load_catalog(d.path.string()), InvalidInput);
  atomic_write_file((d.path / "catalog.json").string(), "{\"format_version\": 1}");
  EXPECT_THROW(load_catalog(d.path.string()), IoError);
  atomic_write_file((d.path / "catalog.json").string(), "not json");
  EXPECT_THROW(load_catalog(d.path.string()), IoError);
  nlohmann::json j = sample(d.path.string()).to_json();
  j["format_version"] = 99;
  atomic_write_file((d.path / "catalog.json").string(), j.dump());
  EXPECT_THROW(load_catalog(d.path.string()), IoError);
}

// A slide- or patient-level index given where a patch index is needed is named for what it is,
// with the searches it answers (issue 28, item 13).
TEST(Catalog, ASlideLevelIndexIsNamedForWhatItIs) {
  Dir d;
  atomic_write_file((d.path / "slide_catalog.json").string(), "{}");
  try {
    load_catalog(d.path.string());
    ADD_FAILURE() << "no error";
  } catch (const InvalidInput& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("is a slide- or patient-level index"), std::string::npos) << what;
    EXPECT_NE(what.find("--similar-slide"), std::string::npos) << what;
    EXPECT_EQ(what.find("run ingest first"), std::string::npos) << what;
  }
}

TEST(Catalog, FileChecksNameDamagedFilesAndOnlyTheShardsAsked) {
  Dir d;
  const Catalog c = sample(d.path.string());
  EXPECT_TRUE(check_catalog_files(c, VerifyLevel::kFull).empty());
  fs::resize_file(d.path / "gen-00000/shard-1", 50);
  auto problems = check_catalog_files(c, VerifyLevel::kCheap);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("shard-1"), std::string::npos) << problems[0];
  EXPECT_TRUE(check_catalog_files(c, VerifyLevel::kCheap, std::vector<int>{0}).empty());
  EXPECT_TRUE(check_catalog_files(c, VerifyLevel::kCheap, std::vector<int>{}).empty());
  EXPECT_FALSE(check_catalog_files(c, VerifyLevel::kCheap, std::vector<int>{1}).empty());
}

}  // namespace
}  // namespace tessera
