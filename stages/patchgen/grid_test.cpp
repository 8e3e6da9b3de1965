#include "stages/patchgen/grid.h"

#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera::patchgen {
namespace {

TEST(ChooseLevel, ExactLevelIsReadDirectly) {
  // 0.25 um/px at level 0, levels 1x 2x 4x: 0.5 um/px is level 1.
  auto c = choose_level({1, 2, 4}, 0.25, 0.5, 224, 0.1);
  EXPECT_EQ(c.level, 1);
  EXPECT_FALSE(c.resample);
  EXPECT_EQ(c.read_size, 224);
  EXPECT_DOUBLE_EQ(c.footprint, 448);
}

TEST(ChooseLevel, WithinToleranceCountsAsMatch) {
  auto c = choose_level({1, 4}, 0.52, 0.5, 224, 0.1);
  EXPECT_EQ(c.level, 0);
  EXPECT_FALSE(c.resample);
  EXPECT_EQ(c.read_size, 224);
}

TEST(ChooseLevel, NoMatchingLevelReadsFinerAndDownscales) {
  // 0.25 um/px, levels 1x 4x 16x; target 0.5: level 0 (0.25) is the coarsest at or finer than 0.5,
  // 448 px are read and shrunk to 224.
  auto c = choose_level({1, 4, 16}, 0.25, 0.5, 224, 0.1);
  EXPECT_EQ(c.level, 0);
  EXPECT_TRUE(c.resample);
  EXPECT_EQ(c.read_size, 448);
  EXPECT_DOUBLE_EQ(c.footprint, 448);
  // target 2.0: level 1 (1.0 um/px), read 448 -> 224.
  auto d = choose_level({1, 4, 16}, 0.25, 2.0, 224, 0.1);
  EXPECT_EQ(d.level, 1);
  EXPECT_EQ(d.read_size, 448);
  EXPECT_DOUBLE_EQ(d.footprint, 1792);
}

TEST(ChooseLevel, TargetFinerThanLevel0Upsamples) {
  auto c = choose_level({1, 2}, 1.0, 0.5, 224, 0.1);
  EXPECT_EQ(c.level, 0);
  EXPECT_TRUE(c.resample);
  EXPECT_EQ(c.read_size, 112);
}

TEST(NearestLevel, LogDistance) {
  EXPECT_EQ(nearest_level({1, 4, 16, 64}, 32), 2);  // 16 and 64 tie in log: the finer wins
  EXPECT_EQ(nearest_level({1, 2, 4, 8, 16, 32, 64}, 32), 5);
  EXPECT_EQ(nearest_level({1}, 32), 0);
}

TEST(SegmentationLevel, CoarsestLevelNotCoarserThanTarget) {
  EXPECT_EQ(segmentation_level({1, 4, 16, 64}, 32), 2);  // nearest_level's tie, but never 64
  EXPECT_EQ(segmentation_level({1, 2, 4, 8, 16, 32, 64}, 32), 5);
  EXPECT_EQ(segmentation_level({1, 4, 16, 64}, 64), 3);
  EXPECT_EQ(segmentation_level({1, 4, 16, 64}, 63), 2);
  EXPECT_EQ(segmentation_level({1, 4, 16}, 1), 0);
}

TEST(SegmentationLevel, NearlyEqualDownsampleCountsAsEqual) {
  // OpenSlide reports e.g. 32.004 for a 32x level of an odd-sized slide.
  EXPECT_EQ(segmentation_level({1, 4.0005, 16.002, 32.004}, 32), 3);
  EXPECT_EQ(segmentation_level({1, 4, 16, 33}, 32), 2);
}

TEST(SegmentationLevel, SparsePyramidFallsBackToCoarserLevel) {
  // Reading level 0 would be 32x the thumbnail per side: the 64x level is used as is.
  EXPECT_EQ(segmentation_level({1, 64}, 32), 1);
  // 8x per side is still read and shrunk.
  EXPECT_EQ(segmentation_level({1, 4, 64}, 32), 1);
  // No coarser level: level 0 whatever the ratio.
  EXPECT_EQ(segmentation_level({1}, 32), 0);
}

TEST(SegmentationLevel, RejectsInvalidArguments) {
  EXPECT_THROW(segmentation_level({}, 32), InvalidInput);
  EXPECT_THROW(segmentation_level({1, 4}, 0), InvalidInput);
}

TEST(Grid, OnlyWholePatchesInsideTheSlide) {
  LevelChoice level = choose_level({1}, 0.5, 0.5, 100, 0.1);
  // 350 x 220: x positions 0,100,200 (300+100 > 350), y positions 0,100 (200+100 > 220).
  auto grid = make_grid(350, 220, level, 100, 100, 0.0, nullptr);
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(grid[0].x, 0);
  EXPECT_EQ(grid[2].x, 200);
  EXPECT_EQ(grid[3].y, 100);  // (y, x) order
  EXPECT_EQ(grid[3].x, 0);
  // Exactly fitting: 300 x 100 gives 3 x 1.
  EXPECT_EQ(make_grid(300, 100, level, 100, 100, 0.0, nullptr).size(), 3u);
  EXPECT_TRUE(make_grid(99, 1000, level, 100, 100, 0.0, nullptr).empty());
}

// docs/operations.md ("QC images"): the grid starts at (0, 0) and the strip past the last whole
// footprint, on the right and at the bottom, is narrower than one grid step and never patched.
TEST(GridUncoveredStrip, IsUnderOneStepAndOnTheRightAndBottom) {
  const LevelChoice level = choose_level({1}, 0.5, 0.5, 224, 0.1);
  // The demo cohort's slides: 2000 x 1500 at 0.5 um/px, 224 px patches: 8 x 6 patches, strips of
  // 208 and 156 px.
  auto demo = make_grid(2000, 1500, level, 224, 224, 0.0, nullptr);
  ASSERT_EQ(demo.size(), 48u);
  EXPECT_EQ(demo.front().x, 0);
  EXPECT_EQ(demo.front().y, 0);
  EXPECT_EQ(2000 - (demo.back().x + 224), 208);
  EXPECT_EQ(1500 - (demo.back().y + 224), 156);
  for (const int stride : {224, 112}) {
    for (int64_t width = 224; width < 224 * 4; width += 7) {
      const auto row = make_grid(width, 224, level, 224, stride, 0.0, nullptr);
      ASSERT_FALSE(row.empty()) << width;
      const int64_t strip = width - (row.back().x + 224);
      EXPECT_GE(strip, 0) << width;
      EXPECT_LT(strip, stride) << width << " stride " << stride;
    }
  }
}

TEST(Grid, StrideAndMppConversion) {
  // level 0 at 0.25 um/px, target 0.5: footprint 200 level-0 px; stride 50 target px = 100 level-0.
  LevelChoice level = choose_level({1}, 0.25, 0.5, 100, 0.1);
  ASSERT_DOUBLE_EQ(level.footprint, 200);
  auto grid = make_grid(500, 200, level, 100, 50, 0.0, nullptr);
  ASSERT_EQ(grid.size(), 4u);  // x = 0, 100, 200, 300
  EXPECT_EQ(grid[1].x, 100);
  EXPECT_EQ(grid[3].x, 300);
  EXPECT_EQ(grid_positions(500, 200, 100), 4);
}

TEST(Grid, TissueFractionThreshold) {
  // A 4x1 mask at 100 level-0 px per mask pixel: tissue in pixels 1 and 2.
  TissueMask mask;
  mask.width = 4;
  mask.height = 1;
  mask.downsample_x = 100;
  mask.downsample_y = 100;
  mask.data = {0, 1, 1, 0};
  TissueIntegral integral(mask);
  LevelChoice level = choose_level({1}, 0.5, 0.5, 100, 0.1);
  auto grid = make_grid(400, 100, level, 100, 50, 0.5, &integral);
  // Positions 0,50,...,300: fractions 0, .5, 1, 1, 1, .5, 0 -> kept 50..250.
  ASSERT_EQ(grid.size(), 5u);
  EXPECT_EQ(grid.front().x, 50);
  EXPECT_FLOAT_EQ(grid.front().tissue, 0.5f);
  EXPECT_EQ(grid.back().x, 250);
}

}  // namespace
}  // namespace tessera::patchgen
