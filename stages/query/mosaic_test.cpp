#include "stages/query/mosaic.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/slide/png_io.h"

namespace tessera::query {
namespace {

namespace fs = std::filesystem;

class MosaicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_query_mosaic_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

Image8 solid(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  Image8 image{width, height, 3, {}};
  for (int i = 0; i < width * height; ++i) image.pixels.insert(image.pixels.end(), {r, g, b});
  return image;
}

MosaicTile hit(int rank, const Image8& image) {
  return {image,
          {"#" + std::to_string(rank) + "  0.9" + std::to_string(rank),
           "slide-" + std::to_string(rank), "x=1234 y=5678"}};
}

const uint8_t* pixel(const Image8& image, int x, int y) {
  return &image.pixels[(static_cast<size_t>(y) * image.width + x) * 3];
}

bool is_white(const uint8_t* p) { return p[0] == 255 && p[1] == 255 && p[2] == 255; }

// Whether any pixel of the rectangle differs from white.
bool any_ink(const Image8& image, int x0, int y0, int width, int height) {
  for (int y = y0; y < y0 + height; ++y) {
    for (int x = x0; x < x0 + width; ++x) {
      if (!is_white(pixel(image, x, y))) return true;
    }
  }
  return false;
}

TEST(MosaicLayoutTest, GridOfFiveColumnsBelowTheQueryRow) {
  const MosaicLayout l = mosaic_layout(224, 7, 4);
  EXPECT_EQ(l.columns, 5);
  EXPECT_EQ(l.rows, 3);
  EXPECT_EQ(l.pad, 9);
  EXPECT_EQ(l.cell_width, 224 + 18);
  EXPECT_EQ(l.cell_height, 224 + 27 + 4 * l.line_height);
  EXPECT_EQ(l.width, 5 * l.cell_width);
  EXPECT_EQ(l.height, 3 * l.cell_height);
  EXPECT_EQ(l.tile_x(0), l.pad);
  EXPECT_EQ(l.tile_y(0), l.pad);
  EXPECT_EQ(l.tile_x(1), l.pad);
  EXPECT_EQ(l.tile_y(1), l.cell_height + l.pad);
  EXPECT_EQ(l.tile_x(5), 4 * l.cell_width + l.pad);
  EXPECT_EQ(l.tile_x(6), l.pad);
  EXPECT_EQ(l.tile_y(6), 2 * l.cell_height + l.pad);
  // Legible: a caption line is at least 10 pixels tall at the default tile size.
  EXPECT_GE(l.line_height, 10);

  const MosaicLayout few = mosaic_layout(64, 2, 1);
  EXPECT_EQ(few.columns, 2);
  EXPECT_EQ(few.rows, 2);
  const MosaicLayout none = mosaic_layout(64, 0, 1);
  EXPECT_EQ(none.columns, 1);
  EXPECT_EQ(none.rows, 1);
  EXPECT_EQ(none.width, none.cell_width);

  EXPECT_THROW(mosaic_layout(31, 3, 1), InvalidInput);
  EXPECT_THROW(mosaic_layout(4096, 3, 1), InvalidInput);
  EXPECT_THROW(mosaic_layout(2048, 1000, 3), InvalidInput);
}

TEST_F(MosaicTest, ImageHasTheDocumentedLayout) {
  const MosaicTile query{solid(80, 80, 200, 100, 180), {"slide-q", "x=0 y=0"}};
  std::vector<MosaicTile> hits;
  for (int i = 1; i <= 7; ++i) hits.push_back(hit(i, solid(80, 80, 20 * i, 0, 255 - 20 * i)));
  write_mosaic(path("m.png"), query, hits, 96);
  const Image8 image = read_png(path("m.png"));
  const MosaicLayout l = mosaic_layout(96, 7, 3);  // the query: "query" + 2 lines
  ASSERT_EQ(image.channels, 3);
  EXPECT_EQ(image.width, l.width);
  EXPECT_EQ(image.height, l.height);

  // Each tile shows its image, scaled up from 80 to 96 pixels.
  for (int cell = 1; cell <= 7; ++cell) {
    const uint8_t* centre = pixel(image, l.tile_x(cell) + 48, l.tile_y(cell) + 48);
    EXPECT_EQ(centre[0], 20 * cell);
    EXPECT_EQ(centre[2], 255 - 20 * cell);
    const uint8_t* corner = pixel(image, l.tile_x(cell), l.tile_y(cell));
    EXPECT_EQ(corner[0], 20 * cell) << "the image fills the whole tile";
  }
  // The query is framed in its colour, on all four sides; the hits are not.
  const int f = l.frame;
  for (const auto& [x, y] :
       std::vector<std::pair<int, int>>{{l.tile_x(0) - f, l.tile_y(0) + 48},
                                        {l.tile_x(0) + 96 + f - 1, l.tile_y(0) + 48},
                                        {l.tile_x(0) + 48, l.tile_y(0) - f},
                                        {l.tile_x(0) + 48, l.tile_y(0) + 96 + f - 1}}) {
    const uint8_t* p = pixel(image, x, y);
    EXPECT_EQ(p[0], kQueryFrameRgb[0]);
    EXPECT_EQ(p[1], kQueryFrameRgb[1]);
    EXPECT_EQ(p[2], kQueryFrameRgb[2]);
  }
  const uint8_t* beside_hit = pixel(image, l.tile_x(1) - f, l.tile_y(1) + 48);
  EXPECT_TRUE(is_white(beside_hit));
  // The query's row holds nothing but the query.
  EXPECT_FALSE(any_ink(image, l.cell_width, 0, l.width - l.cell_width, l.cell_height));
}

TEST_F(MosaicTest, CaptionsAreWrittenBeneathEveryTileAndStayInside) {
  const MosaicTile query{solid(224, 224, 200, 100, 180), {}};
  std::vector<MosaicTile> hits;
  for (int i = 1; i <= 6; ++i) hits.push_back(hit(i, solid(224, 224, 90, 60, 150)));
  hits[2].caption.push_back(std::string(200, 'W'));  // far too long: must be cut
  write_mosaic(path("m.png"), query, hits);
  const Image8 image = read_png(path("m.png"));
  const MosaicLayout l = mosaic_layout(224, 6, 4);
  ASSERT_EQ(image.width, l.width);
  ASSERT_EQ(image.height, l.height);
  for (int cell = 0; cell <= 6; ++cell) {
    SCOPED_TRACE(cell);
    // Every caption line of every tile has ink (the "query" tag for the query) ...
    const int lines = cell == 0 ? 1 : cell == 3 ? 4 : 3;
    for (int line = 0; line < lines; ++line) {
      EXPECT_TRUE(any_ink(image, l.tile_x(cell), l.caption_y(cell) + line * l.line_height, 224,
                          l.line_height))
          << "line " << line;
    }
    // ... and lines that do not exist have none.
    for (int line = lines; line < 4; ++line) {
      EXPECT_FALSE(any_ink(image, l.tile_x(cell), l.caption_y(cell) + line * l.line_height, 224,
                           l.line_height))
          << "line " << line;
    }
  }
  // The cut line does not run into the gap between its cell and the next one.
  const int gap_x = l.tile_x(3) + 224 + 2;
  EXPECT_FALSE(any_ink(image, gap_x, l.caption_y(3), l.tile_x(4) - 2 - gap_x, l.caption_height));
  // The query's "query" tag is a band of the frame colour.
  bool coloured = false;
  for (int y = l.caption_y(0); y < l.caption_y(0) + l.line_height && !coloured; ++y) {
    for (int x = l.tile_x(0); x < l.tile_x(0) + 224 && !coloured; ++x) {
      const uint8_t* p = pixel(image, x, y);
      coloured =
          p[0] == kQueryFrameRgb[0] && p[1] == kQueryFrameRgb[1] && p[2] == kQueryFrameRgb[2];
    }
  }
  EXPECT_TRUE(coloured);
}

TEST_F(MosaicTest, EmptyImagesAreGreyBoxesSayingNoPixels) {
  const MosaicTile query{Image8{}, {"no query image"}};
  write_mosaic(path("m.png"), query, {hit(1, Image8{}), hit(2, solid(32, 32, 0, 0, 0))}, 64);
  const Image8 image = read_png(path("m.png"));
  const MosaicLayout l = mosaic_layout(64, 2, 3);
  ASSERT_EQ(image.width, l.width);
  ASSERT_EQ(image.height, l.height);
  for (int cell : {0, 1}) {
    const uint8_t* corner = pixel(image, l.tile_x(cell) + 1, l.tile_y(cell) + 1);
    EXPECT_EQ(corner[0], 215);
    EXPECT_EQ(corner[1], 215);
    // The "no pixels" text: darker than the box, in its middle band.
    bool text = false;
    for (int y = l.tile_y(cell) + 20; y < l.tile_y(cell) + 44; ++y) {
      for (int x = l.tile_x(cell); x < l.tile_x(cell) + 64; ++x)
        text |= pixel(image, x, y)[0] < 150;
    }
    EXPECT_TRUE(text) << cell;
  }
  EXPECT_EQ(pixel(image, l.tile_x(2) + 32, l.tile_y(2) + 32)[0], 0);
}

TEST_F(MosaicTest, OtherShapesAndGrayAreFittedAndCentred) {
  Image8 wide = solid(200, 100, 255, 0, 0);
  Image8 gray{50, 50, 1, std::vector<uint8_t>(2500, 40)};
  write_mosaic(path("m.png"), {wide, {}}, {hit(1, gray)}, 100);
  const Image8 image = read_png(path("m.png"));
  const MosaicLayout l = mosaic_layout(100, 1, 3);
  // 200x100 becomes 100x50 in the middle of the box; white above and below.
  EXPECT_TRUE(is_white(pixel(image, l.tile_x(0) + 50, l.tile_y(0) + 10)));
  EXPECT_EQ(pixel(image, l.tile_x(0) + 50, l.tile_y(0) + 50)[0], 255);
  EXPECT_EQ(pixel(image, l.tile_x(0) + 50, l.tile_y(0) + 50)[1], 0);
  EXPECT_TRUE(is_white(pixel(image, l.tile_x(0) + 50, l.tile_y(0) + 90)));
  const uint8_t* g = pixel(image, l.tile_x(1) + 50, l.tile_y(1) + 50);
  EXPECT_EQ(g[0], 40);
  EXPECT_EQ(g[1], 40);
  EXPECT_EQ(g[2], 40);
}

TEST_F(MosaicTest, ErrorsNameTheirCause) {
  Image8 broken = solid(10, 10, 1, 2, 3);
  broken.pixels.resize(10);
  EXPECT_THROW(write_mosaic(path("m.png"), {broken, {}}, {}), InvalidInput);
  EXPECT_THROW(write_mosaic(path("m.png"), {solid(8, 8, 0, 0, 0), {}}, {}, 16), InvalidInput);
  EXPECT_FALSE(fs::exists(path("m.png")));
  const std::string blocked = path("file") + "/m.png";  // a directory that is a file
  write_mosaic(path("file"), {solid(8, 8, 0, 0, 0), {}}, {}, 32);
  try {
    write_mosaic(blocked, {solid(8, 8, 0, 0, 0), {}}, {}, 32);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::query
