// The direct tile reader against OpenSlide, pixel for pixel: generated slides (several tile sizes,
// edge tiles, reduced levels, regions crossing the slide's border) and the real fixtures.
#include "common/slide/tile_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "tests/synthslide/synthslide.h"
#include "common/slide/slide_test_support.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using slide_test::kFixtures;

std::string temp_slide(const std::string& name, int64_t w, int64_t h, int tile, uint64_t seed) {
  const fs::path dir = slide_test::scratch_dir();
  fs::create_directories(dir);
  synth::SlideSpec spec;
  spec.path = (dir / name).string();
  spec.width = w;
  spec.height = h;
  spec.tile_size = tile;
  spec.seed = seed;
  spec.tissue_fraction = 0.5;
  synth::write_slide(spec);
  return spec.path;
}

// The same region through OpenSlide and the direct reader; the index of the first differing byte.
void expect_same_region(const Slide& reference, const Slide& direct, int64_t x, int64_t y,
                        int level, int w, int h) {
  std::vector<uint8_t> a(static_cast<size_t>(w) * h * 3), b(a.size(), 7);
  reference.read_rgb(x, y, level, w, h, a.data());
  direct.read_rgb(x, y, level, w, h, b.data());
  auto [pa, pb] = std::mismatch(a.begin(), a.end(), b.begin());
  ASSERT_TRUE(pa == a.end()) << "region x=" << x << " y=" << y << " level=" << level << " " << w
                             << "x" << h << ": first difference at byte " << (pa - a.begin())
                             << " (" << int(*pa) << " vs " << int(*pb) << ")";
}

TEST(TileReader, EveryLevelOfGeneratedSlidesEqualsOpenSlide) {
  // 240-pixel tiles do not divide the sizes: partial edge tiles at every level.
  for (int tile : {256, 240}) {
    const std::string path =
        temp_slide("whole_" + std::to_string(tile) + ".tif", 2500, 1900, tile, 3);
    Slide reference = Slide::open(path);
    Slide direct = Slide::open(path, SlideReader::kDirect);
    ASSERT_STREQ(direct.reader(), "direct");
    ASSERT_GE(direct.level_count(), 2);
    for (int level = 0; level < direct.level_count(); ++level) {
      const auto w = static_cast<int>(direct.width(level)), h = static_cast<int>(direct.height(level));
      expect_same_region(reference, direct, 0, 0, level, w, h);
    }
    EXPECT_EQ(direct.openslide_fallbacks(), 0);
    EXPECT_GT(direct.direct_stats().tiles_decoded, 0);
  }
}

TEST(TileReader, RandomPatchesAcrossBordersEqualOpenSlide) {
  const std::string path = temp_slide("patches.tif", 3000, 2200, 256, 5);
  Slide reference = Slide::open(path);
  Slide direct = Slide::open(path, SlideReader::kAuto);
  ASSERT_STREQ(direct.reader(), "direct") << direct.direct_refusal();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) {
    const int level = static_cast<int>(rng() % 2);
    const int64_t ds = int64_t{1} << level;
    const int size = 1 + static_cast<int>(rng() % 300);
    // Level-aligned positions from beyond the top-left to beyond the bottom-right corner.
    const int64_t x = (static_cast<int64_t>(rng() % 3400) - 200) / ds * ds;
    const int64_t y = (static_cast<int64_t>(rng() % 2600) - 200) / ds * ds;
    expect_same_region(reference, direct, x, y, level, size, size);
  }
  EXPECT_EQ(direct.openslide_fallbacks(), 0);
}

TEST(TileReader, PositionsBetweenLevelPixelsFallBackToOpenSlide) {
  const std::string path = temp_slide("fallback.tif", 2100, 1500, 256, 7);
  Slide reference = Slide::open(path);
  Slide direct = Slide::open(path, SlideReader::kDirect);
  expect_same_region(reference, direct, 301, 0, 1, 64, 64);  // x / 2 is not a whole pixel
  EXPECT_EQ(direct.openslide_fallbacks(), 1);
}

TEST(TileReader, EachTileIsDecodedOnceForRowMajorPatches) {
  const std::string path = temp_slide("once.tif", 2048, 1024, 256, 9);
  Slide direct = Slide::open(path, SlideReader::kDirect);
  std::vector<uint8_t> rgb(224 * 224 * 3);
  for (int64_t y = 0; y + 224 <= 1024; y += 224) {
    for (int64_t x = 0; x + 224 <= 2048; x += 224) direct.read_rgb(x, y, 0, 224, 224, rgb.data());
  }
  // Rows 0..895 of 8 x 4 tiles: all 32 tiles touched, none decoded twice.
  EXPECT_EQ(direct.direct_stats().tiles_decoded, 32);
  EXPECT_GT(direct.direct_stats().tile_hits, 0);
}

TEST(TileReader, SmallCacheDecodesAgainButStaysCorrect) {
  const std::string path = temp_slide("small_cache.tif", 1500, 900, 256, 13);
  Slide reference = Slide::open(path);
  Slide direct = Slide::open(path, SlideReader::kDirect, 256 * 256 * 3);  // one tile
  expect_same_region(reference, direct, 100, 100, 0, 600, 500);
  expect_same_region(reference, direct, 0, 0, 0, 300, 300);
  EXPECT_GT(direct.direct_stats().tiles_decoded, 9);
}

// Threads sharing one Slide: every patch equals OpenSlide's (read once up front), each tile is
// decoded by one thread only (the cache holds them all), and a one-tile cache under contention
// still gives the right pixels. Run under ThreadSanitizer, this is the cache's race test.
TEST(TileReader, ThreadsSharingOneSlideReadTheSamePixelsAndDecodeEachTileOnce) {
  const std::string path = temp_slide("threads.tif", 2300, 1700, 256, 17);
  Slide reference = Slide::open(path);
  constexpr int kSize = 224;
  const size_t bytes = size_t{kSize} * kSize * 3;
  std::vector<std::pair<int64_t, int64_t>> patches;
  for (int64_t y = 0; y + kSize <= 1700; y += kSize) {
    for (int64_t x = 0; x + kSize <= 2300; x += kSize) patches.emplace_back(x, y);
  }
  std::vector<uint8_t> expected(patches.size() * bytes);
  for (size_t i = 0; i < patches.size(); ++i) {
    reference.read_rgb(patches[i].first, patches[i].second, 0, kSize, kSize,
                       expected.data() + i * bytes);
  }
  for (size_t cache : {size_t{64} << 20, size_t{256} * 256 * 3}) {
    Slide direct = Slide::open(path, SlideReader::kDirect, cache);
    std::vector<uint8_t> got(expected.size(), 7);
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < patches.size(); i = next++) {
          direct.read_rgb(patches[i].first, patches[i].second, 0, kSize, kSize,
                          got.data() + i * bytes);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_TRUE(got == expected) << "cache of " << cache << " bytes";
    if (cache == size_t{64} << 20) {
      // Rows 0..1567 and columns 0..2239 of 256 px tiles: 9 x 7 tiles, each decoded once.
      EXPECT_EQ(direct.direct_stats().tiles_decoded, 63);
    }
  }
}

TEST(TileReader, JpegStreamsAreCompleteAndOutOfRangeTilesAreRefused) {
  const std::string path = temp_slide("streams.tif", 1000, 700, 256, 19);
  Slide direct = Slide::open(path, SlideReader::kDirect);
  const TileReader* reader = direct.direct_reader();
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->tile_size(0), std::make_pair(256, 256));
  for (int64_t row = 0; row < 3; ++row) {
    for (int64_t col = 0; col < 4; ++col) {
      const std::vector<uint8_t> jpeg = reader->jpeg_stream(0, col, row);
      ASSERT_GT(jpeg.size(), 4u);
      // One complete JPEG: SOI, the tables, the tile's frame, EOI; no second SOI.
      EXPECT_EQ(jpeg[0], 0xFF);
      EXPECT_EQ(jpeg[1], 0xD8);
      EXPECT_EQ(jpeg[jpeg.size() - 2], 0xFF);
      EXPECT_EQ(jpeg[jpeg.size() - 1], 0xD9);
      int sois = 0;
      for (size_t i = 0; i + 1 < jpeg.size(); ++i) sois += jpeg[i] == 0xFF && jpeg[i + 1] == 0xD8;
      EXPECT_EQ(sois, 1);
    }
  }
  EXPECT_THROW(reader->jpeg_stream(0, 4, 0), IoError);
  EXPECT_THROW(reader->jpeg_stream(0, 0, -1), IoError);
  EXPECT_EQ(Slide::open(path, SlideReader::kOpenSlide).direct_reader(), nullptr);
}

// Issue 21, case 6: 64 bytes flipped inside one tile's entropy-coded data. libjpeg decodes such
// data with a warning into damaged pixels; the reader fails instead, naming the tile, so that
// patchgen fails the slide rather than storing damaged patches.
TEST(TileReader, CorruptTileDataFailsNamingTheTile) {
  const std::string path = temp_slide("corrupt.tif", 1000, 700, 256, 23);
  std::vector<uint8_t> stream;
  {
    Slide direct = Slide::open(path, SlideReader::kDirect);
    stream = direct.direct_reader()->jpeg_stream(0, 1, 1);
  }
  ASSERT_GT(stream.size(), 1000u);
  // The tile's bytes in the file: a run from the middle of its stream, past the tables.
  const size_t at = stream.size() / 2;
  const std::vector<char> needle(stream.begin() + at, stream.begin() + at + 64);
  std::vector<char> file(fs::file_size(path));
  std::FILE* f = std::fopen(path.c_str(), "rb+");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fread(file.data(), 1, file.size(), f), file.size());
  const auto hit = std::search(file.begin(), file.end(), needle.begin(), needle.end());
  ASSERT_NE(hit, file.end());
  for (auto it = hit; it != hit + 64; ++it) {
    // Flipped, but no 0xFF: a marker would end the data instead of corrupting it.
    *it = static_cast<char>(static_cast<uint8_t>(*it) == 0x00 ? 0x01 : ~static_cast<uint8_t>(*it));
    if (static_cast<uint8_t>(*it) == 0xFF) *it = 0x7F;
  }
  std::fseek(f, hit - file.begin(), SEEK_SET);
  ASSERT_EQ(std::fwrite(&*hit, 1, 64, f), 64u);
  std::fclose(f);

  Slide direct = Slide::open(path, SlideReader::kDirect);
  std::vector<uint8_t> rgb(256 * 256 * 3);
  try {
    direct.read_rgb(256, 256, 0, 256, 256, rgb.data());
    FAIL() << "a tile with corrupt data was read";
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("corrupt.tif"), std::string::npos) << msg;
    EXPECT_NE(msg.find("level 0 tile (1, 1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("corrupt JPEG data"), std::string::npos) << msg;
  }
  // The other tiles still read.
  direct.read_rgb(0, 0, 0, 256, 256, rgb.data());
}

TEST(TileReader, AperioFixtureWithRgbJpegTilesEqualsOpenSlide) {
  // small.svs stores RGB (not YCbCr) JPEG tiles without a marker saying so: decoded as TIFF's
  // photometric says, as OpenSlide does.
  Slide reference = Slide::open(kFixtures + "small.svs");
  Slide direct = Slide::open(kFixtures + "small.svs", SlideReader::kDirect);
  ASSERT_STREQ(direct.reader(), "direct");
  expect_same_region(reference, direct, 0, 0, 0, 16, 16);
  expect_same_region(reference, direct, -4, 3, 0, 20, 9);
}

TEST(TileReader, UnreadableAperioFixtureFallsBackAndStillFailsOnRead) {
  Slide s = Slide::open(kFixtures + "unreadable.svs", SlideReader::kAuto);
  EXPECT_STREQ(s.reader(), "openslide");
  EXPECT_FALSE(s.direct_refusal().empty());
  std::vector<uint8_t> rgb(16 * 16 * 3);
  EXPECT_THROW(s.read_rgb(0, 0, 0, 16, 16, rgb.data()), IoError);
}

TEST(TileReader, GenericFixtureIsReadOrRefusedAndForcingARefusedSlideNamesIt) {
  Slide reference = Slide::open(kFixtures + "boxes.tiff");
  Slide automatic = Slide::open(kFixtures + "boxes.tiff", SlideReader::kAuto);
  if (std::string(automatic.reader()) == "direct") {
    for (int level = 0; level < automatic.level_count(); ++level) {
      expect_same_region(reference, automatic, 0, 0, level,
                         static_cast<int>(automatic.width(level)),
                         static_cast<int>(automatic.height(level)));
    }
    return;
  }
  EXPECT_FALSE(automatic.direct_refusal().empty());
  try {
    Slide::open(kFixtures + "boxes.tiff", SlideReader::kDirect);
    FAIL() << "--reader direct opened a slide the direct reader refuses";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("boxes.tiff"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(automatic.direct_refusal()), std::string::npos)
        << e.what();
  }
}

TEST(TileReader, ParseReaderNamesTheOption) {
  EXPECT_EQ(parse_slide_reader("direct", "reader"), SlideReader::kDirect);
  EXPECT_EQ(parse_slide_reader("auto", "reader"), SlideReader::kAuto);
  EXPECT_EQ(parse_slide_reader("openslide", "reader"), SlideReader::kOpenSlide);
  EXPECT_THROW(parse_slide_reader("libtiff", "reader"), InvalidInput);
}

}  // namespace
}  // namespace tessera
