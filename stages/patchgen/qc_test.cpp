#include "stages/patchgen/qc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/slide/png_io.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

Image8 grey_thumbnail(int w, int h) {
  return Image8{w, h, 3, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3, 200)};
}

TissueMask disk_mask(int w, int h, double ds, double cx, double cy, double r) {
  TissueMask m{w, h, ds, ds, std::vector<uint8_t>(static_cast<size_t>(w) * h)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      m.data[static_cast<size_t>(y) * w + x] = std::hypot(x + 0.5 - cx, y + 0.5 - cy) <= r;
  return m;
}

bool has_colour(const Image8& img, int x, int y, const std::array<uint8_t, 3>& rgb) {
  const uint8_t* p = &img.pixels[(static_cast<size_t>(y) * img.width + x) * 3];
  return p[0] == rgb[0] && p[1] == rgb[1] && p[2] == rgb[2];
}

class Qc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_qc_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Qc, WritesThumbnailWithContourAndPatches) {
  const int w = 120, h = 80;
  const double ds = 16;
  Image8 thumb = grey_thumbnail(w, h);
  TissueMask mask = disk_mask(w, h, ds, 60, 40, 25);
  // One 256x256 patch at level-0 (320, 320): thumbnail pixels 20..35 in x and y.
  std::vector<std::array<int64_t, 4>> patches = {{320, 320, 256, 256}};
  const std::string path = (dir_ / "qc.png").string();
  write_qc_png(path, thumb, ds, ds, mask, patches);

  Image8 qc = read_png(path);
  ASSERT_EQ(qc.width, w);
  ASSERT_EQ(qc.height, h);
  ASSERT_EQ(qc.channels, 3);
  int green = 0, green_off_boundary = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      if (!has_colour(qc, x, y, kQcContourRgb)) continue;
      ++green;
      double d = std::hypot(x + 0.5 - 60, y + 0.5 - 40);
      if (std::abs(d - 25) > 2) ++green_off_boundary;
    }
  }
  EXPECT_GT(green, 100);  // circumference ~157 px
  EXPECT_EQ(green_off_boundary, 0);
  EXPECT_TRUE(has_colour(qc, 20, 20, kQcPatchRgb));
  EXPECT_TRUE(has_colour(qc, 35, 28, kQcPatchRgb));
  EXPECT_TRUE(has_colour(qc, 27, 35, kQcPatchRgb));
  EXPECT_FALSE(has_colour(qc, 27, 27, kQcPatchRgb));  // outline only
  EXPECT_FALSE(has_colour(qc, 36, 27, kQcPatchRgb));
  EXPECT_TRUE(has_colour(qc, 5, 5, {200, 200, 200}));  // thumbnail elsewhere untouched
}

TEST_F(Qc, MaskOnAnotherGridIsResampled) {
  // The mask is 4x coarser than the thumbnail but covers the same slide area.
  Image8 thumb = grey_thumbnail(160, 160);
  TissueMask coarse = disk_mask(40, 40, 32, 20, 20, 10);  // level-0 disk centre 640, radius 320
  Image8 qc = render_qc(thumb, 8, 8, coarse, {});
  int green = 0;
  for (int y = 0; y < 160; ++y)
    for (int x = 0; x < 160; ++x)
      if (has_colour(qc, x, y, kQcContourRgb)) {
        ++green;
        EXPECT_NEAR(std::hypot(x + 0.5 - 80, y + 0.5 - 80), 40, 4) << x << "," << y;
      }
  EXPECT_GT(green, 150);
}

TEST_F(Qc, EmptyMaskAndGrayThumbnailGiveThePlainThumbnail) {
  Image8 gray{30, 20, 1, std::vector<uint8_t>(600, 77)};
  Image8 qc = render_qc(gray, 32, 32, TissueMask{}, {});
  ASSERT_EQ(qc.channels, 3);
  for (uint8_t v : qc.pixels) ASSERT_EQ(v, 77);
}

TEST_F(Qc, RejectsBadThumbnailAndUnwritablePath) {
  EXPECT_THROW(render_qc(Image8{}, 32, 32, TissueMask{}, {}), InvalidInput);
  EXPECT_THROW(render_qc(grey_thumbnail(4, 4), 0, 32, TissueMask{}, {}), InvalidInput);
  write_png((dir_ / "file.png").string(), grey_thumbnail(2, 2));
  // The parent "directory" is a regular file.
  EXPECT_THROW(write_qc_png((dir_ / "file.png" / "qc.png").string(), grey_thumbnail(4, 4), 32, 32,
                            TissueMask{}, {}),
               IoError);
}

// Whether the level-0 point lies in the GeoJSON's tissue: inside some Tissue polygon's outer ring
// and inside none of its holes.
bool in_geojson_tissue(const nlohmann::json& fc, double x, double y) {
  const auto ring_contains = [&](const nlohmann::json& ring) {
    std::vector<cv::Point2f> pts;
    for (const auto& p : ring) pts.emplace_back(p[0].get<float>(), p[1].get<float>());
    return cv::pointPolygonTest(pts, cv::Point2f(static_cast<float>(x), static_cast<float>(y)),
                                false) > 0;
  };
  for (const auto& f : fc["features"]) {
    if (f["properties"]["classification"]["name"] != "Tissue") continue;
    const auto& rings = f["geometry"]["coordinates"];
    if (!ring_contains(rings[0])) continue;
    bool in_hole = false;
    for (size_t h = 1; h < rings.size(); ++h) in_hole = in_hole || ring_contains(rings[h]);
    if (!in_hole) return true;
  }
  return false;
}

TEST_F(Qc, GeoJsonParsesAndItsPolygonsMatchTheMask) {
  // An annulus (a region with a hole), a separate square and a single pixel, 16 level-0 px each.
  const int w = 100, h = 70;
  const double ds = 16;
  TissueMask mask{w, h, ds, ds, std::vector<uint8_t>(static_cast<size_t>(w) * h)};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double d = std::hypot(x + 0.5 - 35, y + 0.5 - 35);
      const bool square = x >= 75 && x < 90 && y >= 10 && y < 30;
      mask.data[static_cast<size_t>(y) * w + x] = (d <= 28 && d >= 10) || square || (x == 80 && y == 60);
    }
  }
  std::vector<std::array<int64_t, 4>> patches = {{320, 320, 256, 256}, {576, 320, 256, 256}};
  const std::string path = (dir_ / "qc.geojson").string();
  write_qc_geojson(path, mask, patches);
  const nlohmann::json fc = nlohmann::json::parse(read_file(path));  // throws when malformed
  ASSERT_EQ(fc["type"], "FeatureCollection");
  int tissue = 0, patch = 0, holes = 0;
  for (const auto& f : fc["features"]) {
    ASSERT_EQ(f["type"], "Feature");
    EXPECT_EQ(f["properties"]["objectType"], "annotation");
    const std::string name = f["properties"]["classification"]["name"];
    EXPECT_EQ(f["properties"]["classification"]["color"].size(), 3u);
    ASSERT_EQ(f["geometry"]["type"], "Polygon");
    for (const auto& ring : f["geometry"]["coordinates"]) {
      ASSERT_GE(ring.size(), 4u);
      EXPECT_EQ(ring.front(), ring.back());  // closed
    }
    if (name == "Tissue") {
      ++tissue;
      holes += static_cast<int>(f["geometry"]["coordinates"].size()) - 1;
    } else {
      ASSERT_EQ(name, "Patch");
      ++patch;
    }
  }
  EXPECT_EQ(tissue, 3);
  EXPECT_EQ(holes, 1);
  EXPECT_EQ(patch, 2);
  EXPECT_EQ(fc["features"][tissue]["geometry"]["coordinates"][0][2], nlohmann::json::array({576, 576}));

  // Every mask pixel away from a boundary (3x3 neighbourhood uniform) is tissue exactly when its
  // level-0 centre lies in the GeoJSON's tissue; the single pixel is covered by its square.
  int checked = 0;
  for (int y = 1; y + 1 < h; ++y) {
    for (int x = 1; x + 1 < w; ++x) {
      bool uniform = true;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) uniform = uniform && mask.at(x + dx, y + dy) == mask.at(x, y);
      if (!uniform) continue;
      ++checked;
      ASSERT_EQ(in_geojson_tissue(fc, (x + 0.5) * ds, (y + 0.5) * ds), mask.at(x, y) == 1)
          << x << "," << y;
    }
  }
  EXPECT_GT(checked, w * h / 2);
  EXPECT_TRUE(in_geojson_tissue(fc, 80.5 * ds, 60.5 * ds));
  EXPECT_FALSE(in_geojson_tissue(fc, 35 * ds, 35 * ds));  // the hole
  EXPECT_EQ(read_file(path), qc_geojson(mask, patches).dump() + "\n");  // deterministic
}

TEST_F(Qc, GeoJsonOfManyPatchesIsOneMultiPolygonAndEmptyMaskHasNoTissue) {
  std::vector<std::array<int64_t, 4>> patches;
  for (size_t i = 0; i <= kGeoJsonMaxPatchFeatures; ++i) {
    patches.push_back({static_cast<int64_t>(i) * 224, 0, 224, 224});
  }
  const nlohmann::json fc = qc_geojson(TissueMask{}, patches);
  ASSERT_EQ(fc["features"].size(), 1u);
  EXPECT_EQ(fc["features"][0]["geometry"]["type"], "MultiPolygon");
  EXPECT_EQ(fc["features"][0]["geometry"]["coordinates"].size(), patches.size());
  EXPECT_EQ(fc["features"][0]["properties"]["classification"]["name"], "Patch");
  EXPECT_TRUE(qc_geojson(TissueMask{}, {})["features"].empty());
}

TEST_F(Qc, LegendIsABandUnderTheUnchangedImage) {
  Image8 thumb = grey_thumbnail(400, 300);
  TissueMask mask = disk_mask(400, 300, 16, 200, 150, 80);
  const Image8 plain = render_qc(thumb, 16, 16, mask, {});
  const std::string legend = qc_legend("slide-7", 1234, 12.345);
  EXPECT_EQ(legend, "slide-7 | 1234 patches kept | tissue 12.35 mm2");
  const Image8 framed = render_qc(thumb, 16, 16, mask, {}, legend);
  ASSERT_EQ(framed.width, 400);
  ASSERT_GT(framed.height, 300);
  EXPECT_TRUE(std::equal(plain.pixels.begin(), plain.pixels.end(), framed.pixels.begin()));
  int dark = 0;
  for (size_t i = plain.pixels.size(); i < framed.pixels.size(); ++i) dark += framed.pixels[i] < 100;
  EXPECT_GT(dark, 50);  // the text
}

TEST_F(Qc, OverviewIsAGridOfEverySlideInOrder) {
  write_png((dir_ / "a.png").string(), Image8{200, 100, 3, std::vector<uint8_t>(200 * 100 * 3, 10)});
  write_png((dir_ / "c.png").string(), grey_thumbnail(50, 120));
  const std::string out = (dir_ / "_overview.png").string();
  write_qc_overview(out, dir_.string(), {"a", "b", "c"});  // b has no QC image
  const Image8 sheet = read_png(out);
  EXPECT_EQ(sheet.width, 2 * kOverviewMaxCell);
  EXPECT_EQ(sheet.height, 2 * kOverviewMaxCell);
  EXPECT_TRUE(has_colour(sheet, kOverviewMaxCell / 2, kOverviewMaxCell / 2, {10, 10, 10}));  // a
  EXPECT_TRUE(has_colour(sheet, kOverviewMaxCell + 20, kOverviewMaxCell / 2, {200, 200, 200}));  // b
  EXPECT_TRUE(has_colour(sheet, kOverviewMaxCell / 2, kOverviewMaxCell + 60, {200, 200, 200}));  // c
  EXPECT_TRUE(has_colour(sheet, kOverviewMaxCell + 60, kOverviewMaxCell + 60, {255, 255, 255}));
  const std::string first = read_file(out);
  write_qc_overview(out, dir_.string(), {"a", "b", "c"});
  EXPECT_EQ(read_file(out), first);
}

}  // namespace
}  // namespace tessera::patchgen
