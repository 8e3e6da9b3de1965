#include "stages/patchgen/tissue.h"

#include <gtest/gtest.h>
#include <openslide/openslide.h>
#include <tiffio.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/slide/png_io.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

constexpr double kDs = 32;
constexpr double kMpp = 0.5;  // one thumbnail pixel = 16 x 16 um = 256 um^2

// A near-white, slightly noisy RGB image, as the background of a scanned slide looks.
Image8 blank_thumbnail(int w, int h, uint32_t seed, int noise = 3) {
  Image8 img{w, h, 3, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-noise, noise);
  for (size_t i = 0; i < img.pixels.size(); i += 3) {
    img.pixels[i] = static_cast<uint8_t>(238 + d(rng));
    img.pixels[i + 1] = static_cast<uint8_t>(236 + d(rng));
    img.pixels[i + 2] = static_cast<uint8_t>(240 + d(rng));
  }
  return img;
}

void paint(Image8& img, const std::function<bool(int, int)>& inside, uint8_t r, uint8_t g, uint8_t b) {
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      if (!inside(x, y)) continue;
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * img.width + x) * 3];
      p[0] = r;
      p[1] = g;
      p[2] = b;
    }
  }
}

std::function<bool(int, int)> disk(double cx, double cy, double r) {
  return [=](int x, int y) { return std::hypot(x + 0.5 - cx, y + 0.5 - cy) <= r; };
}

std::function<bool(int, int)> annulus(double cx, double cy, double r_in, double r_out) {
  return [=](int x, int y) {
    double d = std::hypot(x + 0.5 - cx, y + 0.5 - cy);
    return d <= r_out && d > r_in;
  };
}

void paint_tissue(Image8& img, const std::function<bool(int, int)>& inside) {
  paint(img, inside, 214, 128, 180);  // eosin pink, saturation ~102
}

TissueMask mask_of(int w, int h, double ds, const std::function<bool(int, int)>& inside) {
  TissueMask m{w, h, ds, ds, std::vector<uint8_t>(static_cast<size_t>(w) * h)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) m.data[static_cast<size_t>(y) * w + x] = inside(x, y);
  return m;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_tissue_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// ---- detect_tissue --------------------------------------------------------------------------

TEST(DetectTissue, FindsDiskOnNoisyBackground) {
  Image8 thumb = blank_thumbnail(200, 150, 1);
  paint_tissue(thumb, disk(90, 70, 40));
  TissueMask mask = detect_tissue(thumb, kDs, kDs * 1.01, kMpp, TissueParams{});
  EXPECT_EQ(mask.width, 200);
  EXPECT_EQ(mask.height, 150);
  EXPECT_DOUBLE_EQ(mask.downsample_x, kDs);
  EXPECT_DOUBLE_EQ(mask.downsample_y, kDs * 1.01);
  ASSERT_EQ(mask.data.size(), 200u * 150u);
  for (uint8_t v : mask.data) ASSERT_LE(v, 1);
  EXPECT_GT(iou(mask, mask_of(200, 150, kDs, disk(90, 70, 40))), 0.95);
  EXPECT_EQ(mask.at(90, 70), 1);
  EXPECT_EQ(mask.at(5, 5), 0);
}

TEST(DetectTissue, BlankSlideGivesEmptyMask) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Image8 thumb = blank_thumbnail(160, 120, seed, 4);
    EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, TissueParams{}).tissue_pixels(), 0);
    // Without the saturation floor, Otsu splits the noise into "tissue": the guard is what helps.
    TissueParams unguarded;
    unguarded.min_saturation = 0;
    unguarded.median_blur = 1;
    unguarded.close_kernel = 0;
    unguarded.min_area_um2 = 0;
    EXPECT_GT(detect_tissue(thumb, kDs, kDs, kMpp, unguarded).tissue_pixels(), 0);
  }
}

TEST(DetectTissue, FixedThresholdSeparatesFaintAndStrongStain) {
  Image8 thumb = blank_thumbnail(200, 100, 4);
  paint(thumb, disk(50, 50, 30), 230, 200, 215);   // faint: saturation ~33
  paint(thumb, disk(150, 50, 30), 200, 90, 160);   // strong: saturation ~140
  TissueParams params;
  params.threshold = 80;
  TissueMask strong_only = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(strong_only.at(150, 50), 1);
  EXPECT_EQ(strong_only.at(50, 50), 0);
  EXPECT_GT(iou(strong_only, mask_of(200, 100, kDs, disk(150, 50, 30))), 0.95);

  params.threshold = 20;
  TissueMask both = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(both.at(150, 50), 1);
  EXPECT_EQ(both.at(50, 50), 1);
  EXPECT_EQ(both.at(100, 10), 0);
}

TEST(DetectTissue, MinAreaDropsSmallBlob) {
  Image8 thumb = blank_thumbnail(200, 120, 5);
  paint_tissue(thumb, disk(60, 60, 35));
  paint_tissue(thumb, disk(160, 60, 5));  // ~66 px after the median blur = ~17000 um^2
  TissueParams params;
  params.min_area_um2 = 30000;
  TissueMask filtered = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(filtered.at(60, 60), 1);
  EXPECT_EQ(filtered.at(160, 60), 0);
  params.min_area_um2 = 5000;
  TissueMask kept = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(kept.at(60, 60), 1);
  EXPECT_EQ(kept.at(160, 60), 1);
  // The same blob at a coarser mpp covers more micrometres and survives the 30000 um^2 filter.
  params.min_area_um2 = 30000;
  EXPECT_EQ(detect_tissue(thumb, kDs, kDs, 1.0, params).at(160, 60), 1);
}

TEST(DetectTissue, FillHolesFillsAnnulus) {
  Image8 thumb = blank_thumbnail(200, 200, 6);
  paint_tissue(thumb, annulus(100, 100, 30, 60));  // hole of ~2830 px = ~724000 um^2
  TissueParams params;
  params.fill_holes = false;
  TissueMask open = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(open.at(100, 100), 0);
  EXPECT_EQ(open.at(100, 55), 1);
  EXPECT_GT(iou(open, mask_of(200, 200, kDs, annulus(100, 100, 30, 60))), 0.9);

  params.fill_holes = true;
  params.min_hole_area_um2 = 0;  // fill every hole
  TissueMask filled = detect_tissue(thumb, kDs, kDs, kMpp, params);
  EXPECT_EQ(filled.at(100, 100), 1);
  EXPECT_GT(iou(filled, mask_of(200, 200, kDs, disk(100, 100, 60))), 0.95);

  params.min_hole_area_um2 = 500000;  // the hole is bigger: it stays a hole
  EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, params).at(100, 100), 0);
  params.min_hole_area_um2 = 1000000;  // the hole is smaller: it is filled
  EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, params).at(100, 100), 1);
}

TEST(DetectTissue, DefaultKeepsLargeHolesAndFillsSmallOnes) {
  Image8 thumb = blank_thumbnail(200, 200, 8);
  paint_tissue(thumb, [](int x, int y) {
    return x >= 20 && x < 180 && y >= 20 && y < 180 &&
           std::hypot(x + 0.5 - 60, y + 0.5 - 100) > 25 &&  // ~1960 px = ~500000 um^2: kept
           std::hypot(x + 0.5 - 140, y + 0.5 - 100) > 6;    // ~113 px = ~29000 um^2: filled
  });
  TissueMask mask = detect_tissue(thumb, kDs, kDs, kMpp, TissueParams{});
  EXPECT_EQ(mask.at(60, 100), 0);
  EXPECT_EQ(mask.at(140, 100), 1);
  EXPECT_EQ(mask.at(100, 100), 1);
}

TEST(DetectTissue, ClosingDoesNotShiftEdges) {
  // A rectangle with straight edges survives closing of any size unchanged: cv::morphologyEx
  // with an even kernel would move it one pixel right and down.
  Image8 thumb = blank_thumbnail(120, 100, 9);
  auto rect = [](int x, int y) { return x >= 30 && x < 90 && y >= 25 && y < 75; };
  paint_tissue(thumb, rect);
  TissueMask expected = mask_of(120, 100, kDs, rect);
  for (int k : {0, 2, 3, 4, 5, 6}) {
    TissueParams params;
    params.median_blur = 1;
    params.close_kernel = k;
    EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, params).data, expected.data) << "kernel " << k;
  }
}

TEST(DetectTissue, ClosingBridgesNarrowGaps) {
  Image8 thumb = blank_thumbnail(120, 60, 10);
  paint_tissue(thumb, [](int x, int y) { return y >= 20 && y < 40 && x >= 20 && x < 100 && x != 60; });
  TissueParams params;
  params.median_blur = 1;
  params.close_kernel = 0;
  EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, params).at(60, 30), 0);
  params.close_kernel = 4;
  EXPECT_EQ(detect_tissue(thumb, kDs, kDs, kMpp, params).at(60, 30), 1);
}

TEST(DetectTissue, RejectsBadInput) {
  Image8 thumb = blank_thumbnail(10, 10, 7);
  EXPECT_THROW(detect_tissue(Image8{}, kDs, kDs, kMpp, {}), InvalidInput);
  Image8 gray{10, 10, 1, std::vector<uint8_t>(100)};
  EXPECT_THROW(detect_tissue(gray, kDs, kDs, kMpp, {}), InvalidInput);
  EXPECT_THROW(detect_tissue(thumb, 0, kDs, kMpp, {}), InvalidInput);
  EXPECT_THROW(detect_tissue(thumb, kDs, kDs, 0, {}), InvalidInput);
  EXPECT_THROW(detect_tissue(thumb, kDs, kDs, std::nan(""), {}), InvalidInput);
  TissueParams even_blur;
  even_blur.median_blur = 4;
  EXPECT_THROW(detect_tissue(thumb, kDs, kDs, kMpp, even_blur), InvalidInput);
  TissueParams bad_threshold;
  bad_threshold.threshold = 256;
  EXPECT_THROW(detect_tissue(thumb, kDs, kDs, kMpp, bad_threshold), InvalidInput);
}

// ---- detect_tissue on synthetic whole slides ------------------------------------------------

struct SlideCloser {
  void operator()(openslide_t* osr) const noexcept { openslide_close(osr); }
};

// The slide's thumbnail on the grid of ceil(width / ds) x ceil(height / ds) pixels of exactly
// ds x ds level-0 pixels: the best pyramid level is read (beyond the level's edge OpenSlide gives
// transparent pixels, shown as white), converted from premultiplied ARGB to RGB and area-averaged.
Image8 synthetic_thumbnail(const std::string& path, int ds) {
  std::unique_ptr<openslide_t, SlideCloser> osr(openslide_open(path.c_str()));
  EXPECT_TRUE(osr && openslide_get_error(osr.get()) == nullptr) << path;
  if (!osr) return {};
  int64_t w0 = 0, h0 = 0;
  openslide_get_level0_dimensions(osr.get(), &w0, &h0);
  const int level = openslide_get_best_level_for_downsample(osr.get(), ds);
  const int level_ds = static_cast<int>(std::lround(openslide_get_level_downsample(osr.get(), level)));
  const int tw = static_cast<int>((w0 + ds - 1) / ds), th = static_cast<int>((h0 + ds - 1) / ds);
  const int rw = tw * ds / level_ds, rh = th * ds / level_ds;
  std::vector<uint32_t> argb(static_cast<size_t>(rw) * rh);
  openslide_read_region(osr.get(), argb.data(), 0, 0, level, rw, rh);
  EXPECT_EQ(openslide_get_error(osr.get()), nullptr);
  cv::Mat level_rgb(rh, rw, CV_8UC3);
  for (int i = 0; i < rw * rh; ++i) {
    uint32_t p = argb[i], a = p >> 24;
    auto channel = [&](int shift) {
      uint32_t c = (p >> shift) & 0xFF;
      return static_cast<uint8_t>(a == 0 ? 255 : a == 255 ? c : std::min<uint32_t>(255, c * 255 / a));
    };
    level_rgb.at<cv::Vec3b>(i / rw, i % rw) = {channel(16), channel(8), channel(0)};
  }
  Image8 thumb{tw, th, 3, std::vector<uint8_t>(static_cast<size_t>(tw) * th * 3)};
  cv::Mat out(th, tw, CV_8UC3, thumb.pixels.data());
  cv::resize(level_rgb, out, out.size(), 0, 0, cv::INTER_AREA);
  return thumb;
}

using SyntheticSlide = TempDir;

TEST_F(SyntheticSlide, DetectionMatchesGroundTruth) {
  constexpr int kSlideDs = 32;
  for (uint64_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    synth::SlideSpec spec;
    spec.path = path("slide.tif");
    spec.width = 4000;
    spec.height = 3000;
    spec.seed = seed;
    spec.mpp = 0.5;
    spec.mask_path = path("truth.png");
    spec.mask_downsample = kSlideDs;
    spec.tissue_fraction = 0.35;
    synth::write_slide(spec);

    Image8 thumb = synthetic_thumbnail(spec.path, kSlideDs);
    ASSERT_EQ(thumb.width, 125);
    ASSERT_EQ(thumb.height, 94);
    TissueMask detected = detect_tissue(thumb, kSlideDs, kSlideDs, spec.mpp, TissueParams{});
    TissueMask truth = load_mask(spec.mask_path, spec.width, spec.height);
    ASSERT_EQ(truth.width, detected.width);
    ASSERT_EQ(truth.height, detected.height);
    ASSERT_GT(truth.tissue_pixels(), 0.2 * 125 * 94);
    EXPECT_GE(iou(detected, truth), 0.9);
  }
}

TEST_F(SyntheticSlide, BlankSlideHasNoTissue) {
  synth::SlideSpec spec;
  spec.path = path("blank.tif");
  spec.width = 3000;
  spec.height = 2000;
  spec.seed = 5;
  spec.tissue_fraction = 0;
  synth::write_slide(spec);
  Image8 thumb = synthetic_thumbnail(spec.path, 32);
  EXPECT_EQ(detect_tissue(thumb, 32, 32, spec.mpp, TissueParams{}).tissue_pixels(), 0);
}

// ---- iou ------------------------------------------------------------------------------------

TEST(Iou, CountsIntersectionOverUnion) {
  auto left = mask_of(10, 10, 4, [](int x, int) { return x < 6; });   // 60 px
  auto right = mask_of(10, 10, 4, [](int x, int) { return x >= 4; }); // 60 px, 20 shared
  EXPECT_DOUBLE_EQ(iou(left, left), 1.0);
  EXPECT_DOUBLE_EQ(iou(left, right), 20.0 / 100.0);
  auto none = mask_of(10, 10, 4, [](int, int) { return false; });
  EXPECT_DOUBLE_EQ(iou(left, none), 0.0);
  EXPECT_DOUBLE_EQ(iou(none, none), 1.0);
  // b on a grid twice as coarse covering the same level-0 area: resampled by position.
  auto coarse = mask_of(5, 5, 8, [](int x, int) { return x < 3; });  // level-0 x < 24
  EXPECT_DOUBLE_EQ(iou(left, coarse), 1.0);
}

// ---- TissueIntegral -------------------------------------------------------------------------

// Exact tissue fraction by summing the overlap of the rectangle with every mask pixel.
double brute_fraction(const TissueMask& m, double x, double y, double w, double h) {
  double area = 0;
  for (int my = 0; my < m.height; ++my) {
    double oy = std::min(y + h, (my + 1) * m.downsample_y) - std::max(y, my * m.downsample_y);
    if (oy <= 0) continue;
    for (int mx = 0; mx < m.width; ++mx) {
      double ox = std::min(x + w, (mx + 1) * m.downsample_x) - std::max(x, mx * m.downsample_x);
      if (ox > 0 && m.at(mx, my)) area += ox * oy;
    }
  }
  return area / (w * h);
}

TEST(TissueIntegral, HandMadeMaskWithBordersAndPartialPixels) {
  // 4x3 mask, 10 level-0 px per mask px:
  //   1 0 0 1
  //   1 1 0 1
  //   0 0 0 1
  TissueMask m{4, 3, 10, 10, {1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1}};
  TissueIntegral integral(m);
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 40, 30), 6.0 / 12.0);
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 10, 10), 1.0);
  EXPECT_DOUBLE_EQ(integral.fraction(10, 0, 10, 10), 0.0);
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 20, 20), 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(integral.fraction(5, 0, 10, 10), 0.5);        // half of (0,0), half of (1,0)
  EXPECT_DOUBLE_EQ(integral.fraction(5, 5, 10, 10), 0.75);       // quarters of (0,0),(1,0),(0,1),(1,1)
  EXPECT_DOUBLE_EQ(integral.fraction(30, 0, 20, 30), 0.5);       // column 3 then outside the slide
  EXPECT_DOUBLE_EQ(integral.fraction(-10, 0, 20, 10), 0.5);      // outside, then (0,0)
  EXPECT_DOUBLE_EQ(integral.fraction(-20, -20, 100, 100), 6.0 * 100 / 10000);
  EXPECT_DOUBLE_EQ(integral.fraction(50, 50, 10, 10), 0.0);      // entirely outside
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 0, 10), 0.0);
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 10, -1), 0.0);
  EXPECT_DOUBLE_EQ(TissueIntegral().fraction(0, 0, 10, 10), 0.0);
}

TEST(TissueIntegral, MatchesBruteForceOnRandomMasksAndRectangles) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    int w = 1 + static_cast<int>(rng() % 23), h = 1 + static_cast<int>(rng() % 17);
    double dsx = 1 + (rng() % 400) / 13.0, dsy = 1 + (rng() % 400) / 11.0;  // anisotropic, fractional
    TissueMask m{w, h, dsx, dsy, std::vector<uint8_t>(static_cast<size_t>(w) * h)};
    for (auto& v : m.data) v = rng() % 3 == 0;
    TissueIntegral integral(m);
    std::uniform_real_distribution<double> px(-0.3 * w * dsx, 1.3 * w * dsx);
    std::uniform_real_distribution<double> py(-0.3 * h * dsy, 1.3 * h * dsy);
    for (int r = 0; r < 50; ++r) {
      double x = px(rng), y = py(rng);
      double rw = 0.1 + std::abs(px(rng)) * 0.5, rh = 0.1 + std::abs(py(rng)) * 0.5;
      ASSERT_NEAR(integral.fraction(x, y, rw, rh), brute_fraction(m, x, y, rw, rh), 1e-9)
          << "trial " << trial << " rect " << x << "," << y << "," << rw << "," << rh;
    }
  }
}

TEST(TissueIntegral, RebuildReplacesTable) {
  TissueIntegral integral(TissueMask{2, 1, 8, 8, {1, 1}});
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 16, 8), 1.0);
  integral.build(TissueMask{2, 2, 4, 4, {0, 1, 0, 0}});
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 8, 8), 0.25);
  EXPECT_DOUBLE_EQ(integral.fraction(0, 0, 16, 8), 0.125);
}

}  // namespace
}  // namespace tessera::patchgen
