// Real slide files (openslide-python's fixtures, copied with their attribution into
// tests/fixtures/openslide-python) and synthetic slides through the Slide wrapper.
#include "common/slide/slide.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "common/core/error.h"
#include "tests/synthslide/synthslide.h"
#include "common/slide/slide_test_support.h"

namespace tessera {
namespace {

using slide_test::kFixtures;

TEST(Slide, GenericTiffFixtureOpensWithFourLevels) {
  Slide s = Slide::open(kFixtures + "boxes.tiff");
  EXPECT_EQ(s.vendor(), "generic-tiff");
  ASSERT_EQ(s.level_count(), 4);
  EXPECT_EQ(s.width(0), 300);
  EXPECT_EQ(s.height(0), 250);
  EXPECT_EQ(s.width(3), 37);
  std::vector<uint8_t> rgb(10 * 10 * 3);
  s.read_rgb(0, 0, 0, 10, 10, rgb.data());
}

TEST(Slide, AperioFixtureHasMpp) {
  Slide s = Slide::open(kFixtures + "small.svs");
  EXPECT_EQ(s.vendor(), "aperio");
  EXPECT_EQ(s.width(), 16);
  auto mpp = slide_mpp(s, 0);
  ASSERT_TRUE(mpp.has_value());
  EXPECT_EQ(mpp->source, "openslide.mpp");
  EXPECT_GT(mpp->x, 0);
}

TEST(Slide, UnreadableFixtureFailsOnReadNamingTheFile) {
  Slide s = Slide::open(kFixtures + "unreadable.svs");
  std::vector<uint8_t> rgb(16 * 16 * 3);
  try {
    s.read_rgb(0, 0, 0, 16, 16, rgb.data());
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("unreadable.svs"), std::string::npos) << e.what();
  }
}

TEST(Slide, UnopenableAndThumbnailOnlyDicomAndMissingAreClearErrors) {
  // boxes_0.dcm opens (common/slide/dicom_slide_test.cpp); boxes_1.dcm is its thumbnail alone.
  for (const char* name : {"unopenable.tiff", "boxes_1.dcm", "does-not-exist.svs"}) {
    try {
      Slide::open(kFixtures + name);
      FAIL() << name << " opened";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cannot open slide"), std::string::npos) << e.what();
    }
  }
}

TEST(Slide, GenericTiffWithoutResolutionNeedsDefault) {
  Slide s = Slide::open(kFixtures + "boxes.tiff");
  if (!s.property("tiff.XResolution")) {
    EXPECT_FALSE(slide_mpp(s, 0).has_value());
  }
  auto fallback = slide_mpp(s, 0.25);
  ASSERT_TRUE(fallback.has_value());
}

TEST(Slide, SyntheticSlideResolutionFromTiffTags) {
  auto path = (std::filesystem::temp_directory_path() / "tessera_slide_test.tif").string();
  synth::SlideSpec spec;
  spec.path = path;
  spec.width = 1500;
  spec.height = 1100;
  spec.mpp = 0.25;
  synth::write_slide(spec);
  Slide s = Slide::open(path);
  auto mpp = slide_mpp(s, 0);
  ASSERT_TRUE(mpp.has_value());
  EXPECT_EQ(mpp->source, "tiff.resolution");
  EXPECT_NEAR(mpp->x, 0.25, 1e-6);
  spec.write_resolution = false;
  synth::write_slide(spec);
  Slide bare = Slide::open(path);
  EXPECT_FALSE(slide_mpp(bare, 0).has_value());
  std::filesystem::remove(path);
}

TEST(ArgbToRgb, OpaqueTransparentAndPremultiplied) {
  uint32_t argb[3] = {0xff102030u, 0x00000000u, 0x80402010u};
  uint8_t rgb[9];
  argb_to_rgb(argb, 3, rgb);
  EXPECT_EQ(rgb[0], 0x10);
  EXPECT_EQ(rgb[1], 0x20);
  EXPECT_EQ(rgb[2], 0x30);
  EXPECT_EQ(rgb[3], 255);
  EXPECT_EQ(rgb[5], 255);
  EXPECT_EQ(rgb[6], 128);  // (0x40 * 255 + 64) / 128, rounded un-premultiplication
}

// A fully opaque patch takes the vectorised path; one translucent pixel the per-pixel path. Both
// give R, G, B in that order for every opaque pixel.
TEST(ArgbToRgb, OpaquePatchAndOneTranslucentPixel) {
  std::vector<uint32_t> argb(224 * 224 + 5);
  for (size_t i = 0; i < argb.size(); ++i) {
    argb[i] = 0xff000000u | static_cast<uint32_t>(i * 2654435761u >> 8);
  }
  for (bool translucent : {false, true}) {
    if (translucent) argb[77] = 0x80402010u;
    std::vector<uint8_t> rgb(argb.size() * 3);
    argb_to_rgb(argb.data(), argb.size(), rgb.data());
    for (size_t i = 0; i < argb.size(); ++i) {
      if (i == 77 && translucent) continue;
      ASSERT_EQ(rgb[3 * i], (argb[i] >> 16) & 0xff) << i;
      ASSERT_EQ(rgb[3 * i + 1], (argb[i] >> 8) & 0xff) << i;
      ASSERT_EQ(rgb[3 * i + 2], argb[i] & 0xff) << i;
    }
    if (translucent) EXPECT_EQ(rgb[3 * 77], 128);
  }
}

// A slide that is not there is reported as such, not as an unsupported format.
TEST(SlideOpen, AMissingFileSaysSo) {
  try {
    Slide::open("/no/such/slide.svs");
    FAIL() << "a missing slide opened";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/no/such/slide.svs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
