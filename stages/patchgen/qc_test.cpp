#include "stages/patchgen/qc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "common/core/error.h"
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

}  // namespace
}  // namespace tessera::patchgen
