// Patch grid geometry: which pyramid level to read, how large a region to read there, and where
// the patches of one slide lie. Pure functions, unit-tested without slides.
#pragma once

#include <cstdint>
#include <vector>

#include "stages/patchgen/tissue.h"

namespace tessera::patchgen {

// How patches of one slide are read: `read_size` x `read_size` pixels at `level`, resized to the
// patch size when `resample` is set (area filter when shrinking, bilinear when enlarging).
struct LevelChoice {
  int level = 0;
  double level_downsample = 1;  // level-0 pixels per level pixel
  double level_mpp = 0;         // micrometres per pixel at that level
  int read_size = 0;            // pixels read at `level` per patch side
  bool resample = false;
  double footprint = 0;         // level-0 pixels covered by one patch side: read_size * downsample
};

// Picks the coarsest level whose resolution is at or finer than `target_mpp` (within
// `tolerance`, relative); when that level's mpp matches the target within tolerance the patch is
// read there directly, otherwise round(patch_size * target_mpp / level_mpp) pixels are read and
// resized. When every level is coarser than the target (upsampling), level 0 is used.
// `mpp0` is the level-0 resolution; `downsamples` as reported by OpenSlide.
LevelChoice choose_level(const std::vector<double>& downsamples, double mpp0, double target_mpp,
                         int patch_size, double tolerance);

// The level whose downsample is nearest to `target_downsample` in log scale (ties: the finer).
int nearest_level(const std::vector<double>& downsamples, double target_downsample);

// The level to read for a tissue-detection thumbnail of `seg_downsample` level-0 pixels per
// pixel: the coarsest level whose downsample is at most seg_downsample (within 1%, relative, so
// that OpenSlide's slightly-off 32.004 counts as 32), which the caller then area-shrinks to
// seg_downsample. That level is at most seg_downsample / level_downsample times larger per side
// than the thumbnail; when that ratio exceeds kMaxSegReadRatio (sparse pyramids, e.g. levels 1x
// and 64x for a target of 32) and a coarser level exists, the next coarser level is returned
// instead, to be used as is. Level 0 when every level is coarser than the target. Throws
// InvalidInput when `downsamples` is empty or seg_downsample is not positive. Thread-safe.
inline constexpr double kMaxSegReadRatio = 8;
int segmentation_level(const std::vector<double>& downsamples, double seg_downsample);

struct GridPatch {
  int64_t x = 0;  // level-0 top-left corner
  int64_t y = 0;
  float tissue = 0;
};

// The kept patches of a slide of `width` x `height` level-0 pixels, in (y, x) order: positions
// x = round(i * stride0), y = round(j * stride0) with stride0 = stride * footprint / patch_size,
// only where the whole footprint lies inside the slide, kept when the tissue fraction under the
// footprint is at least `min_tissue`. `tissue` may be null: every patch is then kept with
// fraction 1.
std::vector<GridPatch> make_grid(int64_t width, int64_t height, const LevelChoice& level,
                                 int patch_size, int stride, double min_tissue,
                                 const TissueIntegral* tissue);

// Number of grid positions along one axis of `extent` level-0 pixels.
int64_t grid_positions(int64_t extent, double footprint, double stride0);

}  // namespace tessera::patchgen
