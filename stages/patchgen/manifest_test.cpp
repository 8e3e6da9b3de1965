#include "stages/patchgen/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/core/error.h"

namespace tessera::patchgen {
namespace {

std::string message_of(const std::string& text) {
  try {
    parse_manifest(text, "/data/cohort/manifest.csv");
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(Manifest, ParsesColumnsMetadataAndResolvesPaths) {
  auto m = parse_manifest(
      "slide_id,path,patient_id,site,mask_path\n"
      "s1,slides/a.svs,p1,\"Lyon, FR\",masks/a.png\n"
      "s-2.b,/abs/b.tif,p2,\"say \"\"hi\"\"\",\n",
      "/data/cohort/manifest.csv");
  ASSERT_EQ(m.slides.size(), 2u);
  EXPECT_EQ(m.metadata_columns, std::vector<std::string>{"site"});
  EXPECT_EQ(m.slides[0].path, "/data/cohort/slides/a.svs");
  EXPECT_EQ(m.slides[0].mask_path, "/data/cohort/masks/a.png");
  EXPECT_EQ(m.slides[0].metadata[0], "Lyon, FR");
  EXPECT_EQ(m.slides[1].path, "/abs/b.tif");
  EXPECT_EQ(m.slides[1].metadata[0], "say \"hi\"");
  EXPECT_EQ(m.slides[1].mask_path, "");
  EXPECT_EQ(m.slides[1].index, 1);
}

TEST(Manifest, ListsEveryProblemAtOnce) {
  std::string msg = message_of(
      "slide_id,path\n"
      "a,x.svs\n"
      "a,y.svs\n"
      ".hidden,z.svs\n"
      "bad/id,w.svs\n"
      "ok,\n"
      "too,many,fields\n");
  EXPECT_NE(msg.find("/data/cohort/manifest.csv"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3: duplicate slide_id 'a' (first on line 2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 4: slide_id '.hidden' is not a safe file name"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 5: slide_id 'bad/id'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 6: empty path"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 7: 3 fields"), std::string::npos) << msg;
  EXPECT_NE(msg.find("5 problems"), std::string::npos) << msg;
}

TEST(Manifest, MissingColumnsAndEmpty) {
  EXPECT_NE(message_of("id,path\na,b\n").find("required column 'slide_id'"), std::string::npos);
  EXPECT_NE(message_of("").find("no header"), std::string::npos);
  EXPECT_NE(message_of("slide_id,path,a/b\nx,y,z\n").find("column name 'a/b'"), std::string::npos);
  EXPECT_NE(message_of("slide_id,path\n").find("no slides"), std::string::npos);
}

TEST(Manifest, SafeIds) {
  EXPECT_TRUE(is_safe_slide_id("TCGA-AB-1234.01_x"));
  EXPECT_FALSE(is_safe_slide_id(""));
  EXPECT_FALSE(is_safe_slide_id(".x"));
  EXPECT_FALSE(is_safe_slide_id("a b"));
  EXPECT_FALSE(is_safe_slide_id("a/b"));
  EXPECT_FALSE(is_safe_slide_id("é"));
}

TEST(Manifest, FileChecksNameSlideAndPath) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / "tessera_manifest_test";
  fs::create_directories(dir);
  std::ofstream(dir / "present.tif") << "x";
  std::ofstream(dir / "m.csv") << "slide_id,path,mask_path\nA,present.tif,\nB,absent.tif,nomask.png\n";
  try {
    load_manifest((dir / "m.csv").string(), true);
    FAIL();
  } catch (const InvalidInput& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("slide 'B': slide file '" + (dir / "absent.tif").string() + "' does not exist"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("mask file"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("slide 'A'"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(load_manifest((dir / "m.csv").string(), false));
  EXPECT_THROW(load_manifest((dir / "nope.csv").string(), false), InvalidInput);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::patchgen
