#include "tests/synthslide/synthslide.h"

#include <gtest/gtest.h>
#include <openslide/openslide.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/slide/png_io.h"

namespace tessera::synth {
namespace {

namespace fs = std::filesystem;

struct SlideCloser {
  void operator()(openslide_t* osr) const noexcept { openslide_close(osr); }
};
using Slide = std::unique_ptr<openslide_t, SlideCloser>;

Slide open_slide(const std::string& path) {
  Slide slide(openslide_open(path.c_str()));
  EXPECT_TRUE(slide) << "openslide cannot open " << path;
  if (slide) {
    EXPECT_EQ(openslide_get_error(slide.get()), nullptr) << openslide_get_error(slide.get());
  }
  return slide;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Rgb {
  double r = 0, g = 0, b = 0;
};

// Reads a region (x, y in level-0 coordinates, w x h at `level`) as opaque RGB pixels.
std::vector<uint32_t> read_region(openslide_t* osr, int64_t x, int64_t y, int level, int64_t w,
                                  int64_t h) {
  std::vector<uint32_t> argb(static_cast<size_t>(w * h));
  openslide_read_region(osr, argb.data(), x, y, level, w, h);
  EXPECT_EQ(openslide_get_error(osr), nullptr);
  return argb;
}

Rgb mean_colour(const std::vector<uint32_t>& argb) {
  Rgb m;
  for (uint32_t p : argb) {
    m.r += (p >> 16) & 0xff;
    m.g += (p >> 8) & 0xff;
    m.b += p & 0xff;
  }
  const double n = static_cast<double>(argb.size());
  return {m.r / n, m.g / n, m.b / n};
}

// Tissue is pink or purple: green well below red and blue. Background and fat are near white.
bool is_coloured(uint32_t p) {
  const int r = (p >> 16) & 0xff, g = (p >> 8) & 0xff, b = p & 0xff;
  return g < 215 && r > g + 15 && b > g + 15;
}

// Top-left cell of a k x k block of mask cells that all have `value`, searching away from the
// border first; nullopt if none.
std::optional<std::pair<int, int>> find_block(const Image8& mask, uint8_t value, int k) {
  for (int j = 1; j + k < mask.height; ++j) {
    for (int i = 1; i + k < mask.width; ++i) {
      bool uniform = true;
      for (int dj = 0; dj < k && uniform; ++dj) {
        for (int di = 0; di < k && uniform; ++di) {
          uniform = mask.pixels[static_cast<size_t>(j + dj) * mask.width + i + di] == value;
        }
      }
      if (uniform) return std::make_pair(i, j);
    }
  }
  return std::nullopt;
}

double mask_fraction(const Image8& mask) {
  size_t tissue = 0;
  for (uint8_t v : mask.pixels) tissue += v == 255;
  return static_cast<double>(tissue) / mask.pixels.size();
}

class SynthSlideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_synthslide_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  SlideSpec spec(const std::string& name, uint64_t seed = 7) const {
    SlideSpec s;
    s.path = path(name + ".tif");
    s.mask_path = path(name + "_mask.png");
    s.width = 2600;
    s.height = 2000;
    s.seed = seed;
    s.mpp = 0.25;
    return s;
  }

  fs::path dir_;
};

TEST(LevelDimensions, HalvesUntilBelow1024) {
  const auto dims = level_dimensions(100000, 80000);
  ASSERT_EQ(dims.size(), 8u);
  EXPECT_EQ(dims[1], std::make_pair(int64_t{50000}, int64_t{40000}));
  EXPECT_EQ(dims[7], std::make_pair(int64_t{782}, int64_t{625}));
  EXPECT_EQ(level_dimensions(1023, 500).size(), 1u);
  const auto two = level_dimensions(1024, 3);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1], std::make_pair(int64_t{512}, int64_t{2}));
}

TEST_F(SynthSlideTest, SameSeedSameBytesOtherSeedDiffers) {
  SlideSpec a = spec("a", 11);
  SlideSpec b = spec("b", 11);
  SlideSpec c = spec("c", 12);
  const SlideSummary sa = write_slide(a);
  write_slide(b);
  write_slide(c);
  const std::string bytes_a = read_bytes(a.path);
  EXPECT_EQ(sa.bytes, bytes_a.size());
  EXPECT_EQ(bytes_a, read_bytes(b.path));
  EXPECT_NE(bytes_a, read_bytes(c.path));
  EXPECT_EQ(read_bytes(a.mask_path), read_bytes(b.mask_path));
  EXPECT_NE(read_png(a.mask_path).pixels, read_png(c.mask_path).pixels);
  // Only the slides and masks are left: no temporary files.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 6);
}

TEST_F(SynthSlideTest, OpenSlideSeesThePyramidAndResolution) {
  const SlideSpec s = spec("pyramid");
  const SlideSummary summary = write_slide(s);
  EXPECT_FALSE(summary.bigtiff);
  EXPECT_EQ(read_bytes(s.path).substr(0, 4), std::string("II*\0", 4));
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);
  EXPECT_STREQ(openslide_get_property_value(slide.get(), "openslide.vendor"), "generic-tiff");
  ASSERT_EQ(openslide_get_level_count(slide.get()), 3);
  ASSERT_EQ(summary.level_dims.size(), 3u);
  for (int level = 0; level < 3; ++level) {
    int64_t w = 0, h = 0;
    openslide_get_level_dimensions(slide.get(), level, &w, &h);
    EXPECT_EQ(w, summary.level_dims[level].first);
    EXPECT_EQ(h, summary.level_dims[level].second);
    EXPECT_NEAR(openslide_get_level_downsample(slide.get(), level), 1 << level, 0.01);
  }
  EXPECT_EQ(summary.level_dims[2], std::make_pair(int64_t{650}, int64_t{500}));

  const char* x_resolution = openslide_get_property_value(slide.get(), "tiff.XResolution");
  const char* unit = openslide_get_property_value(slide.get(), "tiff.ResolutionUnit");
  ASSERT_NE(x_resolution, nullptr);
  ASSERT_NE(unit, nullptr);
  EXPECT_STREQ(unit, "centimeter");
  EXPECT_NEAR(10000.0 / std::atof(x_resolution), s.mpp, 1e-6);
  EXPECT_EQ(openslide_get_property_value(slide.get(), "openslide.mpp-x"), nullptr);
}

TEST_F(SynthSlideTest, NonRoundMppSurvivesAsRational) {
  SlideSpec s = spec("mpp");
  s.mpp = 0.2527;
  write_slide(s);
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);
  const char* x_resolution = openslide_get_property_value(slide.get(), "tiff.XResolution");
  ASSERT_NE(x_resolution, nullptr);
  EXPECT_NEAR(10000.0 / std::atof(x_resolution), 0.2527, 1e-5);
}

TEST_F(SynthSlideTest, RegionsMatchTheGroundTruth) {
  const SlideSpec s = spec("colours");
  write_slide(s);
  const Image8 mask = read_png(s.mask_path);
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);

  const auto tissue = find_block(mask, 255, 6);
  const auto background = find_block(mask, 0, 6);
  ASSERT_TRUE(tissue.has_value());
  ASSERT_TRUE(background.has_value());
  for (int level = 0; level < 2; ++level) {
    // The inner 4 x 4 cells of each block: 128 x 128 level-0 pixels.
    const int64_t size = 128 >> level;
    const Rgb pink = mean_colour(read_region(slide.get(), (tissue->first + 1) * 32,
                                             (tissue->second + 1) * 32, level, size, size));
    EXPECT_GT(pink.r, pink.g + 40) << "level " << level;
    EXPECT_GT(pink.b, pink.g + 25) << "level " << level;
    EXPECT_LT(pink.g, 190) << "level " << level;
    const std::vector<uint32_t> white =
        read_region(slide.get(), (background->first + 1) * 32, (background->second + 1) * 32, level,
                    size, size);
    for (uint32_t p : white) {
      for (int shift : {16, 8, 0}) {
        const int v = (p >> shift) & 0xff;
        ASSERT_GE(v, 226) << "level " << level;
        ASSERT_LE(v, 250) << "level " << level;
      }
    }
  }

  // Reduced levels sample the same content: a tissue region has about the same mean colour at
  // levels 0 and 2.
  const int64_t x0 = (tissue->first + 1) * 32, y0 = (tissue->second + 1) * 32;
  const Rgb fine = mean_colour(read_region(slide.get(), x0, y0, 0, 128, 128));
  const Rgb coarse = mean_colour(read_region(slide.get(), x0, y0, 2, 32, 32));
  EXPECT_NEAR(fine.r, coarse.r, 10.0);
  EXPECT_NEAR(fine.g, coarse.g, 10.0);
  EXPECT_NEAR(fine.b, coarse.b, 10.0);

  // The pixel at each cell's centre agrees with the mask (fat holes are tissue but white, hence
  // the small tolerance on that side).
  const std::vector<uint32_t> level0 = read_region(slide.get(), 0, 0, 0, s.width, s.height);
  size_t tissue_cells = 0, tissue_coloured = 0, background_cells = 0, background_coloured = 0;
  for (int j = 0; j < mask.height; ++j) {
    for (int i = 0; i < mask.width; ++i) {
      const int64_t x = std::min<int64_t>(i * 32 + 16, s.width - 1);
      const int64_t y = std::min<int64_t>(j * 32 + 16, s.height - 1);
      const bool coloured = is_coloured(level0[static_cast<size_t>(y * s.width + x)]);
      if (mask.pixels[static_cast<size_t>(j) * mask.width + i] == 255) {
        ++tissue_cells;
        tissue_coloured += coloured;
      } else {
        ++background_cells;
        background_coloured += coloured;
      }
    }
  }
  ASSERT_GT(tissue_cells, 0u);
  EXPECT_GT(static_cast<double>(tissue_coloured) / tissue_cells, 0.93);
  EXPECT_LT(static_cast<double>(background_coloured) / background_cells, 0.01);
}

TEST_F(SynthSlideTest, MaskHasGridSizeAndRequestedFraction) {
  for (double fraction : {0.2, 0.35, 0.6}) {
    SlideSpec s = spec("fraction");
    s.tissue_fraction = fraction;
    const SlideSummary summary = write_slide(s);
    const Image8 mask = read_png(s.mask_path);
    EXPECT_EQ(mask.channels, 1);
    EXPECT_EQ(mask.width, (2600 + 31) / 32);
    EXPECT_EQ(mask.height, (2000 + 31) / 32);
    EXPECT_NEAR(mask_fraction(mask), fraction, 0.02);
    EXPECT_DOUBLE_EQ(mask_fraction(mask), summary.tissue_fraction_actual);
  }
  SlideSpec s = spec("coarse");
  s.mask_downsample = 64;
  write_slide(s);
  EXPECT_EQ(read_png(s.mask_path).width, (2600 + 63) / 64);
}

TEST_F(SynthSlideTest, ZeroFractionGivesBlankSlide) {
  SlideSpec s = spec("blank");
  s.tissue_fraction = 0.0;
  const SlideSummary summary = write_slide(s);
  EXPECT_EQ(summary.tissue_fraction_actual, 0.0);
  const Image8 mask = read_png(s.mask_path);
  EXPECT_EQ(mask.pixels, std::vector<uint8_t>(mask.pixels.size(), 0));
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);
  const auto& [w, h] = summary.level_dims.back();
  const int last = static_cast<int>(summary.level_dims.size()) - 1;
  for (uint32_t p : read_region(slide.get(), 0, 0, last, w, h)) ASSERT_FALSE(is_coloured(p));
}

TEST_F(SynthSlideTest, NoResolutionModeWritesNoResolution) {
  SlideSpec s = spec("nores");
  s.write_resolution = false;
  s.mask_path.clear();
  write_slide(s);
  EXPECT_FALSE(fs::exists(path("nores_mask.png")));
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);
  EXPECT_EQ(openslide_get_property_value(slide.get(), "tiff.XResolution"), nullptr);
  EXPECT_EQ(openslide_get_level_count(slide.get()), 3);
}

TEST_F(SynthSlideTest, BigTiffAndOddSizesOpen) {
  SlideSpec s = spec("big");
  s.force_bigtiff = true;
  s.width = 1111;
  s.height = 333;
  s.tile_size = 128;
  const SlideSummary summary = write_slide(s);
  EXPECT_TRUE(summary.bigtiff);
  EXPECT_EQ(read_bytes(s.path).substr(0, 4), std::string("II+\0", 4));
  Slide slide = open_slide(s.path);
  ASSERT_TRUE(slide);
  ASSERT_EQ(openslide_get_level_count(slide.get()), 2);
  int64_t w = 0, h = 0;
  openslide_get_level_dimensions(slide.get(), 1, &w, &h);
  EXPECT_EQ(w, 556);
  EXPECT_EQ(h, 167);

  SlideSpec tiny = spec("tiny");
  tiny.width = 100;
  tiny.height = 70;
  write_slide(tiny);
  Slide small = open_slide(tiny.path);
  ASSERT_TRUE(small);
  EXPECT_EQ(openslide_get_level_count(small.get()), 1);
  EXPECT_EQ(read_png(tiny.mask_path).width, 4);
}

TEST_F(SynthSlideTest, InvalidSpecIsRejected) {
  const auto rejects = [this](auto&& change) {
    SlideSpec s = spec("bad");
    change(s);
    EXPECT_THROW(write_slide(s), InvalidInput);
    EXPECT_FALSE(fs::exists(s.path));
  };
  rejects([](SlideSpec& s) { s.width = 0; });
  rejects([](SlideSpec& s) { s.tile_size = 100; });
  rejects([](SlideSpec& s) { s.jpeg_quality = 0; });
  rejects([](SlideSpec& s) { s.mpp = -1.0; });
  rejects([](SlideSpec& s) { s.tissue_fraction = 1.5; });
  rejects([](SlideSpec& s) { s.mask_downsample = 0; });
  rejects([](SlideSpec& s) {
    s.width = s.height = 1 << 30;
    s.mask_downsample = 32;
  });
}

TEST_F(SynthSlideTest, UnwritableOutputNamesThePathAndLeavesNothing) {
  SlideSpec s = spec("x");
  s.path = path("missing_dir/x.tif");
  try {
    write_slide(s);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(s.path), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
}

}  // namespace
}  // namespace tessera::synth
