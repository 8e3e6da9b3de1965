#include "tests/synthslide/tissue_layout.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

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

// Number of background cells that cannot reach the grid border through background cells.
size_t enclosed_background(const TissueLayout& layout) {
  const int64_t w = layout.grid_width(), h = layout.grid_height();
  std::vector<char> seen(static_cast<size_t>(w * h), 0);
  std::vector<std::pair<int64_t, int64_t>> todo;
  for (int64_t j = 0; j < h; ++j) {
    for (int64_t i = 0; i < w; ++i) {
      if ((i == 0 || j == 0 || i == w - 1 || j == h - 1) && !layout.cell_is_tissue(i, j)) {
        seen[j * w + i] = 1;
        todo.emplace_back(i, j);
      }
    }
  }
  while (!todo.empty()) {
    const auto [i, j] = todo.back();
    todo.pop_back();
    for (const auto& [di, dj] : {std::pair{-1, 0}, {1, 0}, {0, -1}, {0, 1}}) {
      const int64_t a = i + di, b = j + dj;
      if (a >= 0 && b >= 0 && a < w && b < h && !seen[b * w + a] && !layout.cell_is_tissue(a, b)) {
        seen[b * w + a] = 1;
        todo.emplace_back(a, b);
      }
    }
  }
  size_t enclosed = 0;
  for (int64_t j = 0; j < h; ++j) {
    for (int64_t i = 0; i < w; ++i) enclosed += !layout.cell_is_tissue(i, j) && !seen[j * w + i];
  }
  return enclosed;
}

TEST(TissueLayout, HasNoEnclosedBackground) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    for (double fraction : {0.35, 0.7}) {
      EXPECT_EQ(enclosed_background(TissueLayout(5000, 4000, 32, fraction, seed)), 0u)
          << "seed " << seed << " fraction " << fraction;
    }
  }
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
