// Where the tissue lies on a synthetic slide: a smooth low-frequency random field on a coarse grid
// (one cell per `downsample` x `downsample` level-0 pixels), thresholded so that the requested
// share of cells is tissue. The grid is the ground truth: a cell is tissue iff its value exceeds
// the threshold, and the pixel renderer decides tissue vs background by interpolating the same
// grid, so pixels near a cell's centre agree with the cell.
#pragma once

#include <cstdint>
#include <vector>

#include "common/slide/png_io.h"

namespace tessera::synth {

// Interpolation of one axis: the two neighbouring cell indices and the weight of the second.
struct AxisSample {
  int32_t lo = 0;
  int32_t hi = 0;
  float weight = 0.0f;
};

class TissueLayout {
 public:
  // Builds the grid of ceil(width/downsample) x ceil(height/downsample) cells for a slide of
  // width x height level-0 pixels. `tissue_fraction` in [0, 1] is the requested share of tissue
  // cells (0 gives no tissue at all); the achieved share is the closest the field allows. The
  // field falls off towards the slide border, so tissue forms a few blobs away from the edges.
  // Background enclosed by tissue (not 4-connected to the border) is made tissue, so a
  // hole-filling detector and the ground truth agree.
  // Deterministic in `seed`. Memory: 2 bytes per cell. Preconditions (checked by write_slide):
  // positive sizes, downsample >= 1, grid smaller than 2^31 cells per axis.
  TissueLayout(int64_t width, int64_t height, int downsample, double tissue_fraction,
               uint64_t seed);

  int64_t grid_width() const { return grid_width_; }
  int64_t grid_height() const { return grid_height_; }
  int downsample() const { return downsample_; }

  // Field value of cell (i, j) in 0..65535; the cell is tissue iff it exceeds threshold().
  int32_t cell_value(int64_t i, int64_t j) const { return cells_[index(i, j)]; }
  bool cell_is_tissue(int64_t i, int64_t j) const { return cells_[index(i, j)] > threshold_; }
  int32_t threshold() const { return threshold_; }

  // Share of cells that are tissue.
  double tissue_fraction() const { return tissue_fraction_; }

  // Where level-0 pixel coordinate `p` falls between cell centres along an axis of `cells` cells.
  AxisSample axis_sample_x(int64_t x) const { return axis_sample(x, grid_width_); }
  AxisSample axis_sample_y(int64_t y) const { return axis_sample(y, grid_height_); }

  // Bilinear interpolation of the field between cell centres; a pixel is tissue iff
  // interpolate(axis_sample_x(x), axis_sample_y(y)) > threshold().
  float interpolate(const AxisSample& sx, const AxisSample& sy) const {
    const float top = cell_value(sx.lo, sy.lo) +
                      sx.weight * (cell_value(sx.hi, sy.lo) - cell_value(sx.lo, sy.lo));
    const float bottom = cell_value(sx.lo, sy.hi) +
                         sx.weight * (cell_value(sx.hi, sy.hi) - cell_value(sx.lo, sy.hi));
    return top + sy.weight * (bottom - top);
  }
  bool pixel_is_tissue(int64_t x, int64_t y) const {
    return interpolate(axis_sample_x(x), axis_sample_y(y)) > static_cast<float>(threshold_);
  }

  // True when any / every cell in the inclusive rectangle [i0, i1] x [j0, j1] is tissue.
  bool any_tissue(int64_t i0, int64_t j0, int64_t i1, int64_t j1) const;
  bool all_tissue(int64_t i0, int64_t j0, int64_t i1, int64_t j1) const;

  // The ground truth as a gray image of grid_width() x grid_height(): 255 tissue, 0 background.
  Image8 mask() const;

 private:
  size_t index(int64_t i, int64_t j) const { return static_cast<size_t>(j * grid_width_ + i); }
  AxisSample axis_sample(int64_t p, int64_t cells) const;
  // 1 for each background cell (value <= threshold) 4-connected to the grid border.
  std::vector<uint8_t> background_reaching_border(int32_t threshold) const;

  int64_t grid_width_;
  int64_t grid_height_;
  int downsample_;
  int32_t threshold_ = 0;  // -1 .. 65535
  double tissue_fraction_ = 0.0;
  std::vector<uint16_t> cells_;
};

}  // namespace tessera::synth
