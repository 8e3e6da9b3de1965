// Untiled 8-bit RGB TIFFs (which OpenSlide 3.4 refuses) read strip by strip through Slide: every
// pixel, the white outside, the resolution, and the bounded strip cache.
#include "common/slide/strip_tiff.h"

#include <gtest/gtest.h>
#include <tiffio.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "common/slide/slide.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int kW = 700, kH = 500, kRowsPerStrip = 7;

uint8_t expected(int x, int y, int c) {
  return static_cast<uint8_t>(c == 0 ? x % 256 : c == 1 ? y % 256 : (x + 3 * y) % 256);
}

std::string write_stripped(const std::string& name, uint16_t compression) {
  const std::string path =
      (fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".tif")).string();
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, kW);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, kH);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, kRowsPerStrip);
  TIFFSetField(tif, TIFFTAG_COMPRESSION, compression);
  TIFFSetField(tif, TIFFTAG_XRESOLUTION, 20000.0);  // 0.5 um/px
  TIFFSetField(tif, TIFFTAG_YRESOLUTION, 20000.0);
  TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, RESUNIT_CENTIMETER);
  std::vector<uint8_t> row(kW * 3);
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      for (int c = 0; c < 3; ++c) row[x * 3 + c] = expected(x, y, c);
    }
    TIFFWriteScanline(tif, row.data(), y, 0);
  }
  TIFFClose(tif);
  return path;
}

TEST(StripTiff, EveryPixelAndTheWhiteOutsideForEachCompression) {
  for (uint16_t compression : {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
    SCOPED_TRACE(compression);
    const std::string path = write_stripped("strips", compression);
    const Slide s = Slide::open(path, SlideReader::kOpenSlide);  // read directly whatever asked
    EXPECT_STREQ(s.reader(), "direct");
    EXPECT_EQ(s.vendor(), "stripped-tiff");
    ASSERT_EQ(s.level_count(), 1);
    EXPECT_EQ(s.width(), kW);
    EXPECT_EQ(s.height(), kH);
    const auto mpp = slide_mpp(s, 0);
    ASSERT_TRUE(mpp.has_value());
    EXPECT_NEAR(mpp->x, 0.5, 1e-6);
    EXPECT_EQ(mpp->source, "tiff.resolution");
    // A region crossing strips and the right and bottom borders.
    const int x0 = 650, y0 = 480, w = 80, h = 33;
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
    s.read_rgb(x0, y0, 0, w, h, rgb.data());
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) {
          const bool inside = x0 + x < kW && y0 + y < kH;
          ASSERT_EQ(rgb[(static_cast<size_t>(y) * w + x) * 3 + c],
                    inside ? expected(x0 + x, y0 + y, c) : 255)
              << x0 + x << "," << y0 + y;
        }
      }
    }
    EXPECT_EQ(s.read_level(0).pixels.size(), static_cast<size_t>(kW) * kH * 3);
    fs::remove(path);
  }
}

TEST(StripTiff, CacheIsBoundedToTheGivenBytes) {
  const std::string path = write_stripped("strips_cache", COMPRESSION_LZW);
  const int strips = (kH + kRowsPerStrip - 1) / kRowsPerStrip;
  // Room for one strip: reading the image twice decodes every strip twice.
  const Slide one = Slide::open(path, SlideReader::kAuto, size_t{kW} * kRowsPerStrip * 3);
  one.read_level(0);
  one.read_level(0);
  EXPECT_EQ(one.direct_stats().tiles_decoded, 2 * strips);
  // The default cache keeps them all here: decoded once, then served from the cache.
  const Slide all = Slide::open(path, SlideReader::kAuto);
  all.read_level(0);
  all.read_level(0);
  EXPECT_EQ(all.direct_stats().tiles_decoded, strips);
  EXPECT_EQ(all.direct_stats().tile_hits, strips);
  fs::remove(path);
}

TEST(StripTiff, SixteenBitIsNotTaken) {
  const std::string path =
      (fs::temp_directory_path() / ("strips16_" + std::to_string(::getpid()) + ".tif")).string();
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, 8);
  TIFFSetField(tif, TIFFTAG_IMAGELENGTH, 8);
  TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 16);
  TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_RGB);
  TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
  std::vector<uint16_t> row(8 * 3, 1000);
  for (int y = 0; y < 8; ++y) TIFFWriteScanline(tif, row.data(), y, 0);
  TIFFClose(tif);
  std::string why;
  EXPECT_EQ(open_strip_tiff(path, 0, &why), nullptr);
  EXPECT_EQ(why, "3 samples of 16 bits, planar config 1");
  fs::remove(path);
}

}  // namespace
}  // namespace tessera
