#include "stages/synthslide/tissue_layout.h"

#include <gtest/gtest.h>

namespace tessera::synth {
namespace {

TEST(TissueLayout, GridSizeAndDeterminism) {
  const TissueLayout a(5000, 3001, 32, 0.35, 3);
  const TissueLayout b(5000, 3001, 32, 0.35, 3);
  const TissueLayout c(5000, 3001, 32, 0.35, 4);
  EXPECT_EQ(a.grid_width(), 157);
  EXPECT_EQ(a.grid_height(), 94);
  EXPECT_EQ(a.mask().pixels, b.mask().pixels);
  EXPECT_NE(a.mask().pixels, c.mask().pixels);
}

TEST(TissueLayout, AchievesRequestedFraction) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    for (double fraction : {0.05, 0.35, 0.7, 1.0}) {
      const TissueLayout layout(4000, 3000, 32, fraction, seed);
      EXPECT_NEAR(layout.tissue_fraction(), fraction, 0.01) << "seed " << seed;
      size_t tissue = 0;
      for (int64_t j = 0; j < layout.grid_height(); ++j) {
        for (int64_t i = 0; i < layout.grid_width(); ++i) tissue += layout.cell_is_tissue(i, j);
      }
      EXPECT_DOUBLE_EQ(layout.tissue_fraction(),
                       static_cast<double>(tissue) / (layout.grid_width() * layout.grid_height()));
    }
  }
  EXPECT_EQ(TissueLayout(4000, 3000, 32, 0.0, 1).tissue_fraction(), 0.0);
}

TEST(TissueLayout, TissueStaysAwayFromTheBorder) {
  const TissueLayout layout(6400, 6400, 32, 0.35, 9);
  size_t border_tissue = 0, border_cells = 0;
  for (int64_t j = 0; j < layout.grid_height(); ++j) {
    for (int64_t i = 0; i < layout.grid_width(); ++i) {
      if (i == 0 || j == 0 || i + 1 == layout.grid_width() || j + 1 == layout.grid_height()) {
        ++border_cells;
        border_tissue += layout.cell_is_tissue(i, j);
      }
    }
  }
  EXPECT_LT(static_cast<double>(border_tissue) / border_cells, 0.1);
}

TEST(TissueLayout, PixelsAtCellCentresAgreeWithCells) {
  const TissueLayout layout(3000, 2000, 32, 0.4, 2);
  size_t agree = 0;
  const size_t cells = layout.grid_width() * layout.grid_height();
  for (int64_t j = 0; j < layout.grid_height(); ++j) {
    for (int64_t i = 0; i < layout.grid_width(); ++i) {
      agree += layout.pixel_is_tissue(std::min<int64_t>(i * 32 + 16, 2999),
                                      std::min<int64_t>(j * 32 + 16, 1999)) ==
               layout.cell_is_tissue(i, j);
    }
  }
  EXPECT_GT(static_cast<double>(agree) / cells, 0.99);
  // Exactly on a cell's interpolation node the pixel equals the cell.
  const AxisSample sx = layout.axis_sample_x(0);
  const AxisSample sy = layout.axis_sample_y(0);
  EXPECT_EQ(layout.interpolate(sx, sy), static_cast<float>(layout.cell_value(0, 0)));
}

}  // namespace
}  // namespace tessera::synth
