#include "stages/serve/deepzoom.h"

#include <gtest/gtest.h>

namespace tessera::serve {
namespace {

TEST(DeepZoom, LevelsHalveDownToOnePixel) {
  const DeepZoom z(1000, 600);
  EXPECT_EQ(z.max_level(), 10);  // 2^10 = 1024 >= 1000
  EXPECT_EQ(z.level_width(10), 1000);
  EXPECT_EQ(z.level_height(10), 600);
  EXPECT_EQ(z.level_width(9), 500);
  EXPECT_EQ(z.level_height(8), 150);
  EXPECT_EQ(z.level_width(0), 1);
  EXPECT_EQ(z.level_height(0), 1);
  EXPECT_DOUBLE_EQ(z.scale(10), 1);
  EXPECT_DOUBLE_EQ(z.scale(7), 8);
  EXPECT_EQ(DeepZoom(1, 1).max_level(), 0);
  EXPECT_EQ(DeepZoom(257, 3).max_level(), 9);
}

TEST(DeepZoom, TilesCoverTheLevelWithOverlapOnInnerEdges) {
  const DeepZoom z(1000, 600);
  EXPECT_EQ(z.columns(10), 4);  // ceil(1000 / 254)
  EXPECT_EQ(z.rows(10), 3);
  const TileRect first = z.tile(10, 0, 0);
  EXPECT_EQ(first.x, 0);
  EXPECT_EQ(first.w, kTileSize + kOverlap);
  const TileRect inner = z.tile(10, 1, 1);
  EXPECT_EQ(inner.x, kTileSize - kOverlap);
  EXPECT_EQ(inner.w, kTileSize + 2 * kOverlap);
  const TileRect last = z.tile(10, 3, 2);
  EXPECT_EQ(last.x + last.w, 1000);
  EXPECT_EQ(last.y + last.h, 600);
  EXPECT_TRUE(z.has_tile(10, 3, 2));
  EXPECT_FALSE(z.has_tile(10, 4, 0));
  EXPECT_FALSE(z.has_tile(11, 0, 0));
  EXPECT_FALSE(z.has_tile(-1, 0, 0));
  EXPECT_FALSE(z.has_tile(10, -1, 0));
  EXPECT_EQ(z.tile(0, 0, 0).w, 1);
}

TEST(DeepZoom, DescriptorAndThumbnailLevel) {
  const DeepZoom z(1000, 600);
  const std::string dzi = z.dzi();
  EXPECT_NE(dzi.find("TileSize=\"254\""), std::string::npos);
  EXPECT_NE(dzi.find("Overlap=\"1\""), std::string::npos);
  EXPECT_NE(dzi.find("Width=\"1000\" Height=\"600\""), std::string::npos);
  EXPECT_NE(dzi.find("Format=\"jpeg\""), std::string::npos);
  const int l = z.level_for(254);
  EXPECT_GE(std::max(z.level_width(l), z.level_height(l)), 254);
  EXPECT_LT(std::max(z.level_width(l - 1), z.level_height(l - 1)), 254);
}

}  // namespace
}  // namespace tessera::serve
