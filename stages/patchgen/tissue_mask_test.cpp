// load_mask: tissue masks from PNG and TIFF files (strips, tiles, pyramids) at any scale, and the
// files it refuses, named. detect_tissue and TissueIntegral are tested in tissue_test.cpp.
#include "stages/patchgen/tissue.h"

#include <gtest/gtest.h>
#include <tiffio.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/slide/png_io.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

class LoadMask : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_tissue_mask_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void write_gray_tiff(const std::string& path, const std::vector<std::pair<int, int>>& levels,
                     bool tiled, const std::function<uint8_t(int, int, int)>& value) {
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(tif, nullptr);
  for (size_t level = 0; level < levels.size(); ++level) {
    auto [w, h] = levels[level];
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
    if (level > 0) TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_REDUCEDIMAGE);
    if (tiled) {
      constexpr int kTile = 16;
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, kTile);
      TIFFSetField(tif, TIFFTAG_TILELENGTH, kTile);
      std::vector<uint8_t> tile(kTile * kTile);
      for (int ty = 0; ty < h; ty += kTile) {
        for (int tx = 0; tx < w; tx += kTile) {
          for (int y = 0; y < kTile; ++y)
            for (int x = 0; x < kTile; ++x)
              tile[y * kTile + x] = (tx + x < w && ty + y < h) ? value(static_cast<int>(level), tx + x, ty + y) : 0;
          ASSERT_GE(TIFFWriteTile(tif, tile.data(), tx, ty, 0, 0), 0);
        }
      }
    } else {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 7);
      std::vector<uint8_t> row(w);
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) row[x] = value(static_cast<int>(level), x, y);
        ASSERT_EQ(TIFFWriteScanline(tif, row.data(), y, 0), 1);
      }
    }
    ASSERT_TRUE(TIFFWriteDirectory(tif));
  }
  TIFFClose(tif);
}

TEST_F(LoadMask, PngAtAnotherScale) {
  // 50x40 mask for a 5000x4000 slide; tissue where x + y < 40.
  Image8 png{50, 40, 1, std::vector<uint8_t>(2000)};
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 50; ++x) png.pixels[y * 50 + x] = x + y < 40 ? 255 : 0;
  write_png(path("mask.png"), png);
  TissueMask m = load_mask(path("mask.png"), 5000, 4000);
  EXPECT_EQ(m.width, 50);
  EXPECT_EQ(m.height, 40);
  EXPECT_DOUBLE_EQ(m.downsample_x, 100);
  EXPECT_DOUBLE_EQ(m.downsample_y, 100);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 50; ++x) ASSERT_EQ(m.at(x, y), x + y < 40 ? 1 : 0) << x << "," << y;
  EXPECT_DOUBLE_EQ(TissueIntegral(m).fraction(0, 0, 100, 100), 1.0);
  EXPECT_DOUBLE_EQ(TissueIntegral(m).fraction(4900, 3900, 100, 100), 0.0);
}

TEST_F(LoadMask, RgbPngNonzeroInAnyChannelIsTissue) {
  Image8 png{4, 1, 3, {0, 0, 0, 1, 0, 0, 0, 0, 7, 0, 200, 0}};
  write_png(path("rgb.png"), png);
  TissueMask m = load_mask(path("rgb.png"), 400, 100);
  EXPECT_EQ(m.data, (std::vector<uint8_t>{0, 1, 1, 1}));
}

TEST_F(LoadMask, MaskRoundedToWholePixelsIsAccepted) {
  // 4000x3000 at 1/32 is 125 x 93.75 pixels; both roundings must load.
  for (int h : {93, 94}) {
    write_png(path("r.png"), Image8{125, h, 1, std::vector<uint8_t>(125 * h, 255)});
    TissueMask m = load_mask(path("r.png"), 4000, 3000);
    EXPECT_DOUBLE_EQ(m.downsample_x, 32);
    EXPECT_DOUBLE_EQ(m.downsample_y, 3000.0 / h);
  }
  // A tiny mask whose one-pixel rounding exceeds 2% also loads.
  write_png(path("tiny.png"), Image8{13, 4, 1, std::vector<uint8_t>(52, 255)});
  EXPECT_NO_THROW(load_mask(path("tiny.png"), 4000, 1150));
}

TEST_F(LoadMask, AspectMismatchNamesTheFile) {
  write_png(path("square.png"), Image8{50, 50, 1, std::vector<uint8_t>(2500, 255)});
  try {
    load_mask(path("square.png"), 5000, 4000);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(path("square.png")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aspect"), std::string::npos) << e.what();
  }
}

TEST_F(LoadMask, BadFilesNameTheFile) {
  { std::ofstream(path("garbage.png")) << "this is not an image at all"; }
  {
    // A PNG signature followed by junk.
    std::ofstream out(path("truncated.png"), std::ios::binary);
    out << "\x89PNG\r\n\x1a\n" << std::string(40, 'x');
  }
  { std::ofstream(path("bad.tif"), std::ios::binary) << std::string("II*\0", 4) << "junkjunk"; }
  for (const std::string name : {"missing.png", "garbage.png", "truncated.png", "bad.tif"}) {
    try {
      load_mask(path(name), 100, 100);
      ADD_FAILURE() << "expected InvalidInput for " << name;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(path(name)), std::string::npos) << e.what();
    }
  }
}

TEST_F(LoadMask, PlainStripTiff) {
  // libtiff path: a strip TIFF OpenSlide does not open; tissue where x >= 20.
  write_gray_tiff(path("strip.tif"), {{60, 40}}, false,
                  [](int, int x, int) { return x >= 20 ? 255 : 0; });
  TissueMask m = load_mask(path("strip.tif"), 6000, 4000);
  ASSERT_EQ(m.width, 60);
  ASSERT_EQ(m.height, 40);
  EXPECT_DOUBLE_EQ(m.downsample_x, 100);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 60; ++x) ASSERT_EQ(m.at(x, y), x >= 20 ? 1 : 0) << x << "," << y;
}

TEST_F(LoadMask, PyramidalTiffUsesLowestResolution) {
  // Level 0 is all tissue; level 2 (quarter size) has tissue only where y < 8: only level 2 is
  // read. Tiled: through OpenSlide; stripped: OpenSlide declines it and libtiff reads it.
  for (bool tiled : {true, false}) {
    SCOPED_TRACE(tiled ? "tiled" : "stripped");
    write_gray_tiff(path("pyramid.tif"), {{512, 384}, {256, 192}, {128, 96}}, tiled,
                    [](int level, int, int y) { return level < 2 || y < 8 ? 200 : 0; });
    EXPECT_EQ(openslide_detect_vendor(path("pyramid.tif").c_str()) != nullptr, tiled);
    TissueMask m = load_mask(path("pyramid.tif"), 5120, 3840);
    ASSERT_EQ(m.width, 128);
    ASSERT_EQ(m.height, 96);
    EXPECT_DOUBLE_EQ(m.downsample_x, 40);
    for (int y = 0; y < 96; ++y)
      for (int x = 0; x < 128; ++x) ASSERT_EQ(m.at(x, y), y < 8 ? 1 : 0) << x << "," << y;
  }
}

TEST_F(LoadMask, SingleLevelTiledTiff) {
  write_gray_tiff(path("tiled.tif"), {{40, 30}}, true,
                  [](int, int x, int y) { return (x / 5 + y / 5) % 2 ? 1 : 0; });
  TissueMask m = load_mask(path("tiled.tif"), 4000, 3000);
  ASSERT_EQ(m.width, 40);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) ASSERT_EQ(m.at(x, y), (x / 5 + y / 5) % 2) << x << "," << y;
}

TEST_F(LoadMask, HugeMaskIsReducedByMajority) {
  // 16400 columns exceed the 16384 limit: blocks of 2x2 pixels, tissue when >= 2 of 4 are.
  const int w = 16400, h = 301;  // two 256-row bands and a last, one-row block
  Image8 png{w, h, 1, std::vector<uint8_t>(static_cast<size_t>(w) * h, 0)};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      int block = x / 2;
      bool on = (block % 3 == 0) ? true                      // 4 of 4
                : (block % 3 == 1) ? (x % 2 == 0)            // 2 of 4
                                   : (x % 2 == 0 && y % 2 == 0);  // 1 of 4
      png.pixels[static_cast<size_t>(y) * w + x] = on ? 255 : 0;
    }
  }
  write_png(path("huge.png"), png);
  TissueMask m = load_mask(path("huge.png"), w * 10, h * 10);
  ASSERT_EQ(m.width, w / 2);
  ASSERT_EQ(m.height, (h + 1) / 2);
  EXPECT_DOUBLE_EQ(m.downsample_x, 20);
  for (int y = 0; y < m.height - 1; ++y)
    for (int x = 0; x < m.width; ++x) ASSERT_EQ(m.at(x, y), x % 3 != 2 ? 1 : 0) << x << "," << y;
  // The last block row holds one source row (y = 300, even): 2 of 2, 1 of 2, 1 of 2 are tissue.
  for (int x = 0; x < m.width; ++x) ASSERT_EQ(m.at(x, m.height - 1), 1) << x;
}

}  // namespace
}  // namespace tessera::patchgen
