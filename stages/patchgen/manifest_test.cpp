#include "stages/patchgen/manifest.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/store/columns.h"

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

// A slide path may be a folder (a DICOM series); a mask path may not.
TEST(Manifest, SlideFolderIsAcceptedMaskFolderIsNot) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("tessera_manifest_folder_" + std::to_string(::getpid()));
  fs::create_directories(dir / "series");
  std::ofstream(dir / "m.csv") << "slide_id,path,mask_path\nA,series,\nB,series,series\n";
  try {
    load_manifest((dir / "m.csv").string(), true);
    FAIL();
  } catch (const InvalidInput& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find("slide 'A'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("slide 'B': mask file '" + (dir / "series").string() + "' is not a file"),
              std::string::npos) << msg;
  }
  fs::remove_all(dir);
}

// Paths recorded downstream must not depend on the working directory the stage ran in.
TEST(Manifest, RelativeManifestPathGivesAbsoluteNormalisedPaths) {
  namespace fs = std::filesystem;
  const fs::path cwd = fs::current_path();
  auto m = parse_manifest(
      "slide_id,path,mask_path\n"
      "A,slides/../a.svs,./masks/a.png\n"
      "B,/abs/x/../b.tif,\n",
      "cohort/./manifest.csv");
  ASSERT_EQ(m.slides.size(), 2u);
  EXPECT_EQ(m.slides[0].path, (cwd / "cohort/a.svs").lexically_normal().string());
  EXPECT_EQ(m.slides[0].mask_path, (cwd / "cohort/masks/a.png").lexically_normal().string());
  EXPECT_TRUE(fs::path(m.slides[0].path).is_absolute());
  EXPECT_EQ(m.slides[0].path_as_written, "slides/../a.svs");
  EXPECT_EQ(m.slides[1].path, "/abs/b.tif");
  EXPECT_EQ(m.slides[1].path_as_written, "/abs/x/../b.tif");
  EXPECT_EQ(m.slides[1].mask_path, "");
  EXPECT_EQ(m.path, "cohort/./manifest.csv");

  auto bare = parse_manifest("slide_id,path\nA, a.svs \n", "manifest.csv");
  EXPECT_EQ(bare.slides[0].path, (cwd / "a.svs").string());
  EXPECT_EQ(bare.slides[0].path_as_written, "a.svs");
  EXPECT_EQ(parse_manifest("slide_id,path\nA,../a.svs\n", "../m.csv").slides[0].path,
            (cwd / "../../a.svs").lexically_normal().string());
}

TEST(Manifest, SymlinksInTheManifestDirectoryAreKept) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / "tessera_manifest_symlink_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "real");
  fs::create_directory_symlink(dir / "real", dir / "link");
  auto m = parse_manifest("slide_id,path\nA,a.svs\n", (dir / "link" / "m.csv").string());
  EXPECT_EQ(m.slides[0].path, (dir / "link" / "a.svs").string());
  fs::remove_all(dir);
}

TEST(Manifest, AcceptsUtf8ByteOrderMark) {
  auto m = parse_manifest("\xEF\xBB\xBFslide_id,path\nA,a.svs\n", "/data/cohort/manifest.csv");
  ASSERT_EQ(m.slides.size(), 1u);
  EXPECT_EQ(m.slides[0].slide_id, "A");
  EXPECT_EQ(m.slides[0].path, "/data/cohort/a.svs");
  // Line numbers still count from the first line.
  EXPECT_NE(message_of("\xEF\xBB\xBFslide_id,path\nA,\n").find("line 2: empty path"),
            std::string::npos);
  // A mark anywhere else is refused, and visible in the message.
  std::string msg = message_of("slide_id,path\n\xEF\xBB\xBF" "A,a.svs\n");
  EXPECT_NE(msg.find("line 2: slide_id '\\uFEFFA' is not a safe file name"), std::string::npos)
      << msg;
}

TEST(Manifest, SkipsWhitespaceOnlyLines) {
  auto m = parse_manifest(
      " \t\r\n"
      "slide_id,path\r\n"
      "   \r\n"
      "A,a.svs\r\n"
      "\t\n"
      "B,b.svs\n"
      "  ",
      "/data/cohort/manifest.csv");
  ASSERT_EQ(m.slides.size(), 2u);
  EXPECT_EQ(m.slides[1].slide_id, "B");
  // Line numbers are unchanged by skipped lines.
  std::string msg = message_of("slide_id,path\n  \nA,\n");
  EXPECT_NE(msg.find("line 3: empty path"), std::string::npos) << msg;
  EXPECT_NE(message_of(" \nid,path\n").find("line 2: required column 'slide_id'"),
            std::string::npos);
  // Whitespace inside quotes is content: the line is a row with one field.
  msg = message_of("slide_id,path\nA,a.svs\n\"  \"\n");
  EXPECT_NE(msg.find("line 3: 1 fields, the header has 2"), std::string::npos) << msg;
}

TEST(Manifest, RefusesIdsDifferingOnlyInCase) {
  std::string msg = message_of(
      "slide_id,path\n"
      "Slide-1,a.svs\n"
      "b,b.svs\n"
      "slide-1,c.svs\n"
      "SLIDE-1,d.svs\n");
  EXPECT_NE(msg.find("line 4: slide_id 'slide-1' differs only in case from 'Slide-1' on line 2"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("line 5: slide_id 'SLIDE-1' differs only in case from 'Slide-1' on line 2"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("2 problems"), std::string::npos) << msg;
  EXPECT_NO_THROW(parse_manifest("slide_id,path\nA1,a\nA2,b\n", "/m.csv"));
}

TEST(Manifest, RefusesIdsStartingWithDash) {
  std::string msg = message_of("slide_id,path\n-rf,a.svs\nok-1,b.svs\n--x,c.svs\n");
  EXPECT_NE(msg.find("line 2: slide_id '-rf' starts with '-'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 4: slide_id '--x' starts with '-'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 problems"), std::string::npos) << msg;
}

TEST(Manifest, NulBytesAreShownAndRefused) {
  using namespace std::string_literals;
  std::string msg = message_of(
      "slide_id,path,mask_path,site\n"
      "A,a\0.svs,m\0.png,x\n"
      "B\0,b.svs,,y\n"
      "C,c.svs,,z\n"s);
  EXPECT_NE(msg.find("line 2: path 'a\\x00.svs' contains a NUL byte"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2: mask_path 'm\\x00.png' contains a NUL byte"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("line 3: slide_id 'B\\x00' is not a safe file name"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("3 problems"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\0'), std::string::npos);

  // Other control characters are escaped too, so each problem stays on one line.
  msg = message_of("slide_id,path\n\"a\nb\",x.svs\n");
  EXPECT_NE(msg.find("line 2: slide_id 'a\\x0ab'"), std::string::npos) << msg;

  // The manifest path itself.
  try {
    load_manifest("/tmp/m\0.csv"s, false);
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("'/tmp/m\\x00.csv' contains a NUL byte"),
              std::string::npos) << e.what();
  }

  // A hand-built manifest is not checked against a shorter path.
  Manifest manifest;
  SlideEntry entry;
  entry.slide_id = "A";
  entry.path = "/tmp\0/x"s;
  manifest.slides.push_back(entry);
  auto problems = check_manifest_files(manifest);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "slide 'A': slide file '/tmp\\x00/x' contains a NUL byte");
}

TEST(Manifest, MppColumnOverridesAndIsNotMetadata) {
  auto m = parse_manifest("slide_id,path,mpp,site\na,a.svs,0.2527,x\nb,b.svs,,y\nc,c.svs, 1e0 ,z\n",
                          "/data/m.csv");
  EXPECT_EQ(m.metadata_columns, std::vector<std::string>{"site"});
  EXPECT_DOUBLE_EQ(m.slides[0].mpp, 0.2527);
  EXPECT_EQ(m.slides[1].mpp, 0);  // empty: the slide's metadata
  EXPECT_DOUBLE_EQ(m.slides[2].mpp, 1.0);
  EXPECT_EQ(parse_manifest("slide_id,path\na,a.svs\n", "/data/m.csv").slides[0].mpp, 0);
  const std::string msg =
      message_of("slide_id,path,mpp\na,a.svs,0\nb,b.svs,-0.5\nc,c.svs,0.5um\nd,d.svs,inf\n");
  EXPECT_NE(msg.find("4 problems"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 4: mpp '0.5um'"), std::string::npos) << msg;
}

TEST(Manifest, DirectoryManifestListsMatchingFilesSorted) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessera_slides_dir_" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub.svs");
  for (const char* f : {"b.svs", "a.SVS", "c, d.svs", "notes.txt", ".svs", "e.ndpi"}) {
    std::ofstream(dir / f) << "x";
  }
  const std::string text = directory_manifest(dir.string(), {".svs"});
  const std::string d = dir.lexically_normal().string();
  EXPECT_EQ(text, "slide_id,path\na," + d + "/a.SVS\nb," + d + "/b.svs\n\"c, d\",\"" + d +
                      "/c, d.svs\"\n");
  fs::remove(dir / "c, d.svs");  // its id is not a safe file name: parse_manifest refuses it
  const Manifest m = parse_manifest(directory_manifest(dir.string(), {".svs", ".ndpi"}),
                                    (dir / "manifest.csv").string());
  ASSERT_EQ(m.slides.size(), 3u);
  EXPECT_EQ(m.slides[2].slide_id, "e");
  EXPECT_EQ(m.slides[2].path, d + "/e.ndpi");
  EXPECT_THROW(directory_manifest(dir.string(), {".tiff"}), InvalidInput);
  EXPECT_THROW(directory_manifest((dir / "missing").string(), {".svs"}), InvalidInput);
  fs::remove_all(dir);
}

// Issue 21, case 4: a metadata column named like a built-in one would shadow it in query's filters
// and output.
TEST(Manifest, RefusesMetadataColumnsNamedLikeBuiltInOnesListingThem) {
  for (const char* name : {"patch_id", "x", "tissue", "score", "Slide_MPP", "shard"}) {
    const std::string msg =
        message_of(fmt::format("slide_id,path,{}\na,a.svs,7\n", name));
    EXPECT_NE(msg.find(fmt::format("line 1: column name '{}' is reserved", name)),
              std::string::npos)
        << msg;
    for (const auto& builtin : kBuiltinColumns) {
      EXPECT_NE(msg.find(std::string(builtin)), std::string::npos) << builtin << ": " << msg;
    }
  }
  EXPECT_EQ(message_of("slide_id,path,patient_id,mpp,site,xy\na,a.svs,p,0.5,lung,1\n"), "");
}

// Issue 21, case 16: a Latin-1 manifest is refused, naming line and column, instead of carrying
// invalid UTF-8 into every output.
TEST(Manifest, RefusesInvalidUtf8NamingLineAndColumn) {
  const std::string msg =
      message_of("slide_id,path,site\na,a.svs,lung\nb,b.svs,br\xe9" "ast\nc,c.svs,\xc3\xa9t\xe9\n");
  EXPECT_NE(msg.find("line 3, column 11: not valid UTF-8 (byte 0xe9)"), std::string::npos) << msg;
  // Columns count characters: the valid two-byte e-acute before the bad byte is one column.
  EXPECT_NE(msg.find("line 4, column 11: not valid UTF-8 (byte 0xe9)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 problems"), std::string::npos) << msg;
  // Truncated, overlong and surrogate sequences are invalid too; valid multi-byte text is kept.
  for (const char* bad : {"\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    EXPECT_NE(message_of(std::string("slide_id,path,site\na,a.svs,") + bad + "\n")
                  .find("line 2, column 9: not valid UTF-8"),
              std::string::npos)
        << bad;
  }
  const Manifest m = parse_manifest("slide_id,path,site\na,a.svs,S\xc3\xa3o Paulo \xe2\x82\xac\xf0\x9f\x94\xac\n",
                                    "/m.csv");
  EXPECT_EQ(m.slides[0].metadata[0], "S\xc3\xa3o Paulo \xe2\x82\xac\xf0\x9f\x94\xac");
}

// Issue 21, case 17: an id whose files would not fit NAME_MAX is refused at validation.
TEST(Manifest, RefusesSlideIdsTooLongForTheFileNamesStagesWrite) {
  const std::string longest(kMaxSlideIdLength, 'a');
  EXPECT_EQ(message_of("slide_id,path\n" + longest + ",a.svs\n"), "");
  const std::string msg = message_of("slide_id,path\nok,b.svs\n" + std::string(250, 'b') + ",a.svs\n");
  EXPECT_NE(msg.find("line 3: slide_id 'bbbb"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("is 250 characters long; at most {}", kMaxSlideIdLength)),
            std::string::npos)
      << msg;
  EXPECT_NE(message_of("slide_id,path\n" + longest + "a,a.svs\n").find("is too long"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::patchgen
